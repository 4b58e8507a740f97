#pragma once

// --prometheus FILE (check, nccl-log, profile): the verdict as node_exporter's textfile collector
// reads it (the Prometheus text exposition format), so a fleet's health can be graphed and
// alerted on.

#include "doctor/engine/verdict.hpp"

#include <string>
#include <string_view>

namespace doctor::engine {

/// The number a severity has in the metrics, worst last: pass 0, skip 1, warn 2, fail 3, error 4
/// (alert on `>= 3`: not fit to train).
int severity_level(Severity severity);

/// A label value as the exposition format quotes it: backslash, double quote and newline escaped.
std::string prometheus_label_value(std::string_view value);

/// The metrics of one verdict, every family with # HELP and # TYPE (all gauges), each series with
/// a `subcommand` label (check, nccl-log, profile), so the files of several subcommands can sit in
/// one textfile directory:
/// - gpudoctor_probe_status{probe}: the worst severity of each group (check's probes) that ran;
/// - gpudoctor_finding{probe,code,severity,subject}: one series per finding, its severity_level;
/// - gpudoctor_findings{severity}: how many findings of each severity;
/// - gpudoctor_exit_code, gpudoctor_last_run_timestamp_seconds (`now`, Unix time), gpudoctor_info;
/// - where `facts` (check's; nullptr for the others) have them: gpudoctor_gpus,
/// gpudoctor_gpu_ecc_errors{gpu,bus_id,type}, and
///   the deep tier's measurements in bytes per second (medians) and seconds:
///   gpudoctor_copy_bandwidth_bytes_per_second{gpu,bus_id,direction=h2d|d2h|d2d},
///   gpudoctor_p2p_bandwidth_bytes_per_second{src,dst}, gpudoctor_p2p_latency_seconds{src,dst},
///   gpudoctor_allreduce_bus_bandwidth_bytes_per_second,
///   gpudoctor_allreduce_algorithm_bandwidth_bytes_per_second{gpus}.
std::string render_prometheus(const Verdict& verdict, const Facts* facts, double now, const std::string& version);

} // namespace doctor::engine
