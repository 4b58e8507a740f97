#pragma once

#include "base/error.hpp"

#include <functional>
#include <string>

namespace test_support {

/// The message of the base::Error that `f` throws, or `none` when it throws nothing.
inline std::string error_of(const std::function<void()>& f, const std::string& none = "")
{
    try {
        f();
    } catch (const base::Error& e) {
        return e.what();
    }
    return none;
}

} // namespace test_support
