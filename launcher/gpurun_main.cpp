#include "base/process.hpp"
#include "launcher/gpurun.hpp"

int main(int argc, char** argv)
{
    return base::exit_status_after_output(launcher::run_gpurun(argc, argv), "gpurun");
}
