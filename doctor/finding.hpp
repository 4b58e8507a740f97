#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace doctor {

/// How a check came out. A probe that did not run is never `pass`: it is `skip` with a reason,
/// or `error` when the probe itself broke (timed out, crashed).
enum class Severity { pass, warn, fail, skip, error };

const char* to_string(Severity severity);

/// One conclusion about the node. `code` is stable and documented (`gpudoctor explain CODE`).
struct Finding {
    std::string code; ///< "gpus.ecc_uncorrected"
    Severity severity = Severity::pass;
    std::string subject; ///< "host", "gpu 3 (0000:47:00.0)", "mlx5_0 port 1"
    std::string message; ///< what was seen, with the values
    std::string remedy; ///< what to do; empty for pass
    nlohmann::json facts = nullptr; ///< the numbers behind it
};

/// The long form of a finding code, for `gpudoctor explain` and the man page.
struct CodeInfo {
    std::string code;
    std::string title;
    std::string explanation;
    std::string remedy;
};

} // namespace doctor
