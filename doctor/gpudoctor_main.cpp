#include "base/process.hpp"
#include "doctor/gpudoctor.hpp"

int main(int argc, char** argv)
{
    return base::exit_status_after_output(doctor::run_gpudoctor(argc, argv), "gpudoctor");
}
