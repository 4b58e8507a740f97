# One INTERFACE target that carries the project's warning flags.
add_library(gpukit_warnings INTERFACE)
target_compile_options(gpukit_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
if(GPUKIT_WERROR)
  target_compile_options(gpukit_warnings INTERFACE -Werror)
endif()
