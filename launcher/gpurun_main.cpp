#include "launcher/gpurun.hpp"
#include "probes/process.hpp"

int main(int argc, char** argv)
{
    return probes::exit_status_after_output(launcher::run_gpurun(argc, argv), "gpurun");
}
