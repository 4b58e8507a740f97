#include "launcher/gpurun.hpp"

int main(int argc, char** argv)
{
    return launcher::run_gpurun(argc, argv);
}
