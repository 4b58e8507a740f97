# Installing and packaging: `cmake --install BUILD [--prefix DIR]` and `cpack -G DEB` in the build
# directory. The programs find everything relative to themselves (gpurun-rank beside gpurun in bin/,
# data in bin/../share/gpukit), so any prefix works, and the package installs under /usr.

# Bash completion, one file per program, where bash-completion looks for it on demand.
install(FILES
  ${PROJECT_SOURCE_DIR}/share/bash-completion/completions/gpurun
  ${PROJECT_SOURCE_DIR}/share/bash-completion/completions/gpudoctor
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# Set the maintainer when building a package to ship. The Homepage field is left out unless
# GPUKIT_PACKAGE_HOMEPAGE is given: the project has no public home to name yet.
set(GPUKIT_PACKAGE_MAINTAINER "gpukit maintainers <maintainers@users.noreply.a-seed-1d3f7439.example>"
  CACHE STRING "Maintainer field of the Debian package")
set(GPUKIT_PACKAGE_HOMEPAGE "" CACHE STRING "Homepage field of the Debian package (left out when empty)")

set(CPACK_PACKAGE_NAME gpukit)
set(CPACK_PACKAGE_VENDOR gpukit)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${GPUKIT_PACKAGE_MAINTAINER}")
if(GPUKIT_PACKAGE_HOMEPAGE)
  set(CPACK_PACKAGE_HOMEPAGE_URL "${GPUKIT_PACKAGE_HOMEPAGE}")
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${GPUKIT_PACKAGE_HOMEPAGE}")
endif()
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU-aware MPI launcher (gpurun) and node health checker (gpudoctor)")
# The extended description, in lines under 80 columns; CPack indents them and turns empty lines
# into " ." for Debian.
set(CPACK_PACKAGE_DESCRIPTION "gpurun starts one MPI rank per GPU through Open MPI's mpirun, each bound to
the CPU cores and NUMA memory nearest its GPU, with the environment PyTorch
DDP, Horovod and MPI+NCCL expect.

gpudoctor tells whether a node is fit to train and why not: driver, GPU
health, libraries, frameworks, topology, peer-to-peer, InfiniBand, NCCL
environment, limits, MPI, binding. It reads NCCL logs and Nsight Systems
exports, fits batch sizes, and writes node_exporter metrics and JUnit XML.
Slurm prolog and health-check scripts are in /usr/share/gpukit/slurm.

GPU libraries (NVML, CUDA, NCCL) are loaded at run time: installing needs no
CUDA toolkit or driver.")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GPUKIT_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends: from the binaries' own libraries (libhwloc15, libc6, libstdc++6 for gpudoctor, zlib1g,
# libsqlite3-0, ...) through dpkg-shlibdeps, so a new library is picked up without an edit.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# gpurun runs mpirun (found on PATH at run time; another MPI works too); bash-completion loads the
# completions; scontrol (slurm-client) is what the Slurm scripts call.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openmpi-bin, bash-completion")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client, prometheus-node-exporter")

include(CPack)
