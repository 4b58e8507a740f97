#pragma once

// Extra report files (check --prometheus, --junit) are read by other programs while gpudoctor
// writes them: node_exporter's textfile collector scrapes whenever it likes, a CI server picks the
// file up when the job ends. They must see the old file or the new one, never part of one.

#include <string>
#include <string_view>
#include <vector>

namespace doctor {

/// Replaces `path` with `content` atomically: a temporary file in the same directory
/// (".NAME.XXXXXX", which node_exporter's textfile collector ignores: it reads only *.prom), written
/// whole, given mode 0666 less the umask (mkstemp makes 0600, which node_exporter could not read),
/// fsynced, then renamed over `path`. On any failure the temporary file is removed, `path` is left
/// as it was, and probes::Error says which step failed: "--prometheus /x/node.prom: cannot create a
/// temporary file in /x: Permission denied". `what` names the option that asked for the file.
void write_file_atomically(const std::string& path, std::string_view content, const std::string& what);

/// A file for write_files_atomically: `what` is the option that asked for it.
struct OutputFile {
    std::string what;
    std::string path;
    std::string content;
};

/// Writes several files as write_file_atomically does, all of them to their temporary names
/// first: when one cannot be written, none is replaced.
void write_files_atomically(const std::vector<OutputFile>& files);

} // namespace doctor
