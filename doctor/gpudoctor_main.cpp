#include "doctor/gpudoctor.hpp"

int main(int argc, char** argv)
{
    return doctor::run_gpudoctor(argc, argv);
}
