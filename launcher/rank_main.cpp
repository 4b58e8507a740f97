#include "launcher/gpurun.hpp"

int main(int argc, char** argv)
{
    return launcher::run_rank_helper(argc, argv);
}
