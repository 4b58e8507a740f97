#pragma once

// Every C++ file of the project is compiled with this header included first (see the top
// CMakeLists.txt). nlohmann::json checks its preconditions with JSON_ASSERT, which is assert()
// by default: in a release build a read through a const json of a key that is not there, such as
// facts["driver_file"] on facts from a snapshot that lacks it, then reads past the end of the
// object. Here a broken precondition throws instead, so a rule that reads a missing fact fails
// with an error the caller reports, and never reads memory that is not there.

#include <stdexcept>

namespace base {

/// What JSON_ASSERT throws (a function, not a throw in the macro: g++ warns about a throw written
/// inside nlohmann's noexcept functions).
[[noreturn]] inline void json_precondition_failed()
{
    throw std::out_of_range("a JSON value that is not there was read");
}

} // namespace base

#define JSON_ASSERT(condition)                                                                                         \
    (static_cast<bool>(condition) ? static_cast<void>(0) : ::base::json_precondition_failed())
