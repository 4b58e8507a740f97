# One INTERFACE target that carries the project's warning flags.
add_library(gpukit_warnings INTERFACE)
target_compile_options(gpukit_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
if(GPUKIT_WERROR)
  target_compile_options(gpukit_warnings INTERFACE -Werror)
endif()
# GCC's -Wmaybe-uninitialized reports false positives inside libstdc++ (std::regex, std::function)
# once ASan/UBSan instrumentation is on; the plain build keeps the warning.
if((GPUKIT_SANITIZE OR GPUKIT_FUZZ) AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(gpukit_warnings INTERFACE -Wno-maybe-uninitialized)
endif()
