#include "doctor/monitor/cli.hpp"

#include "base/atomic_file.hpp"
#include "base/cli_values.hpp"
#include "base/error.hpp"
#include "base/process.hpp"
#include "base/spelling.hpp"
#include "base/usage/sampler.hpp"
#include "doctor/cli/subcommand_args.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace doctor::monitor {

namespace {

using base::Error;
using Clock = std::chrono::steady_clock;

// NVML's utilisation sample period is 1/6 s to 1 s: faster sampling only repeats readings.
constexpr double min_interval = 0.1;
constexpr double max_interval = 3600;
constexpr double max_duration = 1e7;

struct MonitorArgs {
    double interval = 1.0;
    double duration = 0; ///< 0: until the command ends or a signal comes
    bool json = false;
    std::string gpus;
    std::string output;
    std::vector<std::string> command;
};

// An NVML call that does not return (a wedged driver) ends the monitor after this long, with
// exit status 3: gpudoctor could not run.
constexpr unsigned nvml_deadline_s = 30;
constexpr const char* nvml_stuck = "gpudoctor: monitor: an NVML call did not return in 30 s; the monitor stops\n";

// The terminal's width in columns (80 when it does not say).
std::size_t terminal_width(std::FILE* file)
{
    winsize size{};
    return ioctl(fileno(file), TIOCGWINSZ, &size) == 0 && size.ws_col > 0 ? size.ws_col : 80;
}

// Where the monitor writes: standard output, standard error when a command holds standard output
// (as perf stat does), or --output FILE.
class Output {
public:
    explicit Output(const MonitorArgs& a)
    {
        if (!a.output.empty()) {
            // Not inherited by the command; never through another user's link.
            const int fd = base::open_output_file(a.output, "--output");
            m_file = fdopen(fd, "w");
            if (m_file == nullptr) {
                const int err = errno;
                close(fd);
                throw Error(fmt::format("--output {}: {}", a.output, std::strerror(err)));
            }
            m_owned = true;
        } else {
            m_file = a.command.empty() ? stdout : stderr;
        }
        m_tty = isatty(fileno(m_file)) != 0;
    }
    ~Output()
    {
        if (m_owned) {
            std::fclose(m_file);
        }
    }
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;

    void write(const std::string& text)
    {
        clear_status();
        fmt::print(m_file, "{}", text);
        std::fflush(m_file);
    }
    /// A line kept at the bottom of a terminal and rewritten; nothing elsewhere.
    void status(const std::string& line)
    {
        if (m_tty) {
            fmt::print(m_file, "\r\x1b[K{}", line);
            std::fflush(m_file);
            m_status = true;
        }
    }
    bool tty() const { return m_tty; }
    std::size_t width() const { return terminal_width(m_file); }

private:
    void clear_status()
    {
        if (m_status) {
            fmt::print(m_file, "\r\x1b[K");
            m_status = false;
        }
    }

    std::FILE* m_file = nullptr;
    bool m_owned = false;
    bool m_tty = false;
    bool m_status = false;
};

int sample(const MonitorArgs& a, const base::Nvml& nvml, const std::vector<base::usage::MonitoredGpu>& gpus)
{
    Output out(a);
    base::usage::GpuSampler sampler(nvml, gpus);
    base::usage::GpuSummariser summariser;

    base::Supervisor command;
    if (!a.command.empty()) {
        command.start(a.command, false, fmt::format("gpudoctor: monitor: cannot run {}: ", a.command[0]));
    }
    int child_status = -1;
    // A signal sent to us alone is passed on (a terminal's Ctrl-C reached both); without a command
    // it ends the sampling.
    auto handle = [&](const base::Supervisor::Event& event) {
        if (event.signal != 0 && command.started() && !event.from_terminal) {
            command.child().signal(event.signal);
        }
        if (event.exited) {
            child_status = event.exit_code;
        }
        return event.exited || (event.signal != 0 && !command.started());
    };

    if (!a.json) {
        out.write(base::usage::render_sample_header());
    }
    base::usage::SampleSchedule schedule(a.interval);
    // Wait for the next sample, the command's end or a signal.
    auto wait = [&](base::usage::SampleSchedule::Clock::time_point until) {
        bool stop = false;
        while (Clock::now() < until && !stop) {
            stop = handle(command.wait(std::chrono::duration_cast<std::chrono::nanoseconds>(until - Clock::now())));
        }
        return stop;
    };
    auto taken = [&](const std::vector<base::usage::GpuSample>& samples) {
        std::string text;
        for (const auto& s : samples) {
            summariser.add(s);
            if (a.json) {
                nlohmann::json line = base::usage::to_json(s);
                line["type"] = "sample";
                text += line.dump() + "\n";
            } else {
                text += base::usage::render_sample_row(s);
            }
        }
        out.write(text);
        if (out.tty() && !a.json) {
            // Shorter than the terminal: a line that wraps is not cleared by "\r\033[K".
            out.status(base::usage::render_running_line(summariser.summaries(a.interval), out.width() - 1));
        }
    };
    const unsigned samples = base::usage::sample_on_schedule(
        &sampler, schedule, a.duration, {nvml_deadline_s, nvml_stuck, 3, nullptr}, wait, taken);
    while (command.started() && child_status < 0) {
        handle(command.wait(std::chrono::seconds(1)));
    }

    const auto summaries = summariser.summaries(a.interval);
    if (a.json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& s : summaries) {
            list.push_back(base::usage::to_json(s));
        }
        nlohmann::json listed = nlohmann::json::array();
        for (const auto& g : gpus) {
            listed.push_back(base::usage::to_json(g));
        }
        nlohmann::json end = {
            {"type", "summary"}, {"interval", a.interval}, {"samples", samples}, {"gpus", listed}, {"summary", list}};
        if (command.started()) {
            end["command_status"] = child_status;
        }
        out.write(end.dump() + "\n");
    } else {
        std::string head = fmt::format("\n{} GPU{}, {} sample{} every {}s", gpus.size(), gpus.size() == 1 ? "" : "s",
            samples, samples == 1 ? "" : "s", a.interval);
        if (command.started()) {
            head += fmt::format(" while {} ran (exit status {})", a.command[0], child_status);
        }
        out.write(fmt::format("{}; kernel-active time is the share of each sample with a kernel running, not how "
                              "busy the SMs were\n{}",
            head, samples == 0 ? std::string("no samples\n") : base::usage::render_summary_text(gpus, summaries)));
    }
    return command.started() ? child_status : 0;
}

} // namespace

int run_monitor(const cli::Subcommand& self, int argc, char** argv)
{
    // Everything after the first "--" is the command to watch.
    cli::CommandLine line = cli::split_at_dashes(argc, argv);
    MonitorArgs a;
    a.command = line.command;

    CLI::App app("Sample the GPUs through NVML, like nvidia-smi dmon: kernel-active time, memory, power and clock "
                 "events; then judge them as the source documents do (above 90% with rare dips).",
        "gpudoctor monitor");
    base::add_number(app, "--interval", a.interval, "Seconds between samples, 0.1 to 3600 (default 1)", "S");
    auto* duration = base::add_number(app, "--duration", a.duration, "Sample for S seconds, then summarise", "S");
    app.add_flag("--json", a.json, "One JSON object per sample and GPU per line, then a summary object");
    bool no_color = false; // accepted as by every subcommand: this text has no colour to leave out
    app.add_flag("--no-color", no_color, "No colour (also when NO_COLOR is set)");
    app.add_option("--gpus", a.gpus, "GPUs to watch: NVML indexes, bus ids or UUIDs, comma-separated (default all)")
        ->type_name("LIST");
    app.add_option("--output", a.output, "Write the table or JSON lines to FILE")->type_name("FILE");
    app.footer("Usage: gpudoctor monitor [--interval S] [--duration S | -- CMD ARGS...]\n"
               "Without --duration or a command it samples until interrupted (Ctrl-C). With a command, it samples "
               "until the command exits and writes to standard error, leaving standard output to the command.\n"
               "Exit status: 0 done, the command's own status when one ran, 2 usage or input error, 3 NVML could "
               "not be used. See gpudoctor(1).");
    if (!cli::parse_subcommand(app, line, self.name)) {
        return 0;
    }
    if (!(a.interval >= min_interval && a.interval <= max_interval)) {
        throw Error(fmt::format("--interval {}: expected the seconds between samples, from {} to {}", a.interval,
            min_interval, max_interval));
    }
    if (duration->count() > 0 && !(a.duration > 0 && a.duration <= max_duration)) {
        throw Error(fmt::format("--duration {}: expected seconds, more than 0", a.duration));
    }
    if (line.dashes && a.command.empty()) {
        throw Error("monitor: no command after --; give one, as in gpudoctor monitor -- python train.py");
    }
    if (duration->count() > 0 && !a.command.empty()) {
        throw Error("monitor: --duration and a command both given; sampling ends with the command, or after "
                    "--duration: choose one");
    }
    if (!a.command.empty() && !base::find_executable(a.command[0], std::getenv("PATH"))) {
        throw Error(fmt::format("monitor: cannot run '{}': not {}", a.command[0],
            a.command[0].find('/') != std::string::npos ? "an executable file" : "an executable in PATH"));
    }
    std::vector<std::string> selectors;
    if (!a.gpus.empty()) {
        selectors = base::split_commas(a.gpus);
    }

    std::optional<base::Nvml> nvml;
    std::vector<base::NvmlGpu> all;
    try {
        const base::CallDeadline deadline(nvml_deadline_s, nvml_stuck, 3);
        nvml.emplace(base::Nvml::load());
        all = nvml->gpus();
    } catch (const Error& e) {
        throw base::Unavailable(fmt::format("monitor: cannot read the GPUs through NVML: {}", e.what()));
    }
    if (all.empty()) {
        throw base::Unavailable("monitor: NVML lists no GPU on this node: nothing to sample");
    }
    return sample(a, *nvml, base::usage::select_gpus(all, selectors));
}

} // namespace doctor::monitor
