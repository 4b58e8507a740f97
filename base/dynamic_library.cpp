#include "base/dynamic_library.hpp"

#include "base/error.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <utility>

namespace base {

DynamicLibrary::DynamicLibrary(const std::string& file) : m_file(file)
{
    // Never unmapped: GPU user-space drivers are not written to be unloaded and reloaded. Lazy
    // binding: only a few functions are ever called, and libcublas alone has thousands.
    m_handle = dlopen(file.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (m_handle == nullptr) {
        const char* why = dlerror();
        throw Error(fmt::format("cannot load {}: {}", file, why != nullptr ? why : "unknown dlopen error"));
    }
}

DynamicLibrary::~DynamicLibrary()
{
    if (m_handle != nullptr) {
        dlclose(m_handle);
    }
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : m_handle(std::exchange(other.m_handle, nullptr)), m_file(std::move(other.m_file))
{
}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept
{
    if (this != &other) {
        if (m_handle != nullptr) {
            dlclose(m_handle);
        }
        m_handle = std::exchange(other.m_handle, nullptr);
        m_file = std::move(other.m_file);
    }
    return *this;
}

void* DynamicLibrary::find(const char* name) const
{
    return dlsym(m_handle, name);
}

} // namespace base
