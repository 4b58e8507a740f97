# Precompiled headers. Nearly every file includes nlohmann::json, fmt and a handful of standard
# headers (and every test GoogleTest): parsing them was most of a build's time. Each C++ target
# gets one precompiled header of them, json_assert.hpp first (it must come before nlohmann::json;
# without precompiled headers it is force-included instead, see CMakeLists.txt).

set(GPUKIT_PCH_HEADERS
  "${PROJECT_SOURCE_DIR}/base/json_assert.hpp"
  <nlohmann/json.hpp>
  <fmt/format.h>
  <map>
  <memory>
  <optional>
  <string>
  <vector>)

# Adds the precompiled header to every C++ target of several files defined in `dir` and the
# directories below it (for one or two files, building it costs more than it saves).
function(gpukit_precompile_headers dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.cpp$")
    list(LENGTH sources count)
    if(count LESS 3)
      target_compile_options(${target} PRIVATE "SHELL:-include ${PROJECT_SOURCE_DIR}/base/json_assert.hpp")
      continue()
    endif()
    set(headers ${GPUKIT_PCH_HEADERS})
    get_target_property(links ${target} LINK_LIBRARIES)
    if(links MATCHES "GTest::")
      list(APPEND headers <gtest/gtest.h>)
    endif()
    target_precompile_headers(${target} PRIVATE ${headers})
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    gpukit_precompile_headers("${sub}")
  endforeach()
endfunction()
