#include "doctor/gpudoctor.hpp"
#include "probes/process.hpp"

int main(int argc, char** argv)
{
    return probes::exit_status_after_output(doctor::run_gpudoctor(argc, argv), "gpudoctor");
}
