#include "base/python.hpp"

#include "base/input_file.hpp"
#include "base/process.hpp"
#include "base/spelling.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <vector>

extern char** environ;

namespace base {

namespace {

using Env = std::map<std::string, std::string>;

const char* getenv(const Env& env, const std::string& name)
{
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
}

// The words of a pyenv version file (.python-version, PYENV_ROOT/version): one version or more,
// blank-separated, "#" starting a comment.
std::vector<std::string> version_words(const std::filesystem::path& file)
{
    std::ifstream in(file);
    std::vector<std::string> out;
    std::string word;
    while (in >> word) {
        if (word.starts_with("#")) {
            std::getline(in, word);
            continue;
        }
        out.push_back(word);
    }
    return out;
}

// The interpreter a pyenv shim would run, found as pyenv does it (pyenv-version-name, pyenv-which):
// PYENV_VERSION, else .python-version in PYENV_DIR (or the working directory) and its parents,
// else PYENV_ROOT/version, else "system"; each a version under PYENV_ROOT/versions (a prefix such
// as 3.11 takes the latest 3.11.N) or "system", python3 in PATH past the shims. A shim is a bash
// script that starts pyenv, some 0.1 to 0.5 s before the interpreter itself: too slow for
// check --quick. nullopt when `file` is no shim or the version is not found (the shim runs then).
std::optional<std::string> resolve_pyenv_shim(const std::string& file, const Env& env)
{
    namespace fs = std::filesystem;
    const fs::path shims = fs::path(file).parent_path();
    const fs::path root = shims.parent_path();
    std::error_code ec;
    if (shims.filename() != "shims" || !fs::is_directory(root / "versions", ec)) {
        return std::nullopt;
    }
    std::vector<std::string> versions;
    if (const char* v = getenv(env, "PYENV_VERSION"); v != nullptr && *v != '\0') {
        versions = split(v, ':');
    } else {
        const char* dir = getenv(env, "PYENV_DIR") != nullptr ? getenv(env, "PYENV_DIR") : getenv(env, "PWD");
        for (fs::path d = dir != nullptr ? fs::path(dir) : fs::path(); !d.empty() && versions.empty();
             d = d.parent_path()) {
            versions = version_words(d / ".python-version");
            if (d == d.parent_path()) {
                break;
            }
        }
        if (versions.empty()) {
            versions = version_words(root / "version");
        }
        if (versions.empty()) {
            versions = {"system"};
        }
    }
    for (const auto& version : versions) {
        if (version == "system") {
            std::string path;
            for (const auto& dir : split(getenv(env, "PATH") != nullptr ? getenv(env, "PATH") : "", ':')) {
                if (fs::path(dir) != shims) {
                    path += (path.empty() ? "" : ":") + dir;
                }
            }
            if (auto real = find_executable("python3", path.c_str())) {
                return real;
            }
            continue;
        }
        std::vector<std::string> matches;
        for (const auto& entry : fs::directory_iterator(root / "versions", ec)) {
            const std::string name = entry.path().filename().string();
            if (name == version || name.starts_with(version + ".")) {
                matches.push_back(name);
            }
        }
        std::sort(matches.begin(), matches.end(), natural_less);
        const std::string chosen = std::find(matches.begin(), matches.end(), version) != matches.end()
            ? version
            : (matches.empty() ? std::string() : matches.back());
        if (auto real = find_executable((root / "versions" / chosen / "bin/python3").string(), nullptr);
            real && !chosen.empty()) {
            return real;
        }
    }
    return std::nullopt;
}

} // namespace

std::map<std::string, std::string> environment()
{
    std::map<std::string, std::string> out;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry(*e);
        if (auto eq = entry.find('='); eq != std::string::npos && eq != 0) {
            out.emplace(entry.substr(0, eq), entry.substr(eq + 1)); // the first, as getenv finds it
        }
    }
    return out;
}

Interpreter find_python(const std::map<std::string, std::string>& env)
{
    Interpreter out;
    if (const char* forced = getenv(env, "GPUKIT_PYTHON"); forced != nullptr && *forced != '\0') {
        if (auto file = find_executable(forced, getenv(env, "PATH"))) {
            out.file = *file;
        } else {
            out.error = fmt::format("GPUKIT_PYTHON={} is not an executable file", forced);
        }
        return out;
    }
    if (auto file = find_executable("python3", getenv(env, "PATH"))) {
        if (auto real = resolve_pyenv_shim(*file, env)) {
            out.shim = *file;
            out.file = *real;
        } else {
            out.file = *file;
        }
        return out;
    }
    out.error = "python3 is not in PATH (set GPUKIT_PYTHON to the interpreter of the training jobs)";
    return out;
}

} // namespace base
