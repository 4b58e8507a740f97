#pragma once

#include <string>

namespace base {

/// An owned dlopen handle. GPU libraries are only ever loaded through this, at run time, so one
/// binary runs on any driver and on machines without one.
class DynamicLibrary {
public:
    /// Opens `file` (a soname searched the usual way, or a path). Throws base::Error with
    /// dlerror()'s text when it cannot be opened.
    explicit DynamicLibrary(const std::string& file);
    ~DynamicLibrary();
    DynamicLibrary(const DynamicLibrary&) = delete;
    DynamicLibrary& operator=(const DynamicLibrary&) = delete;
    DynamicLibrary(DynamicLibrary&& other) noexcept;
    DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;

    /// The address of `name`, or nullptr when the library does not export it.
    void* find(const char* name) const;

    /// Fills a typed function pointer; returns whether the symbol was there.
    template <typename Fn> bool bind(Fn& fn, const char* name) const
    {
        fn = reinterpret_cast<Fn>(find(name));
        return fn != nullptr;
    }

    const std::string& file() const { return m_file; }

private:
    void* m_handle = nullptr;
    std::string m_file;
};

} // namespace base
