#pragma once

// The findings of an NCCL log: one row per finding code, each with the small rule that makes its
// findings from what one job's log shows. Private to base/nccl: rules.cpp gathers the evidence,
// the rows judge it.

#include "base/nccl/log.hpp"
#include "base/nccl/state.hpp"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace base::nccl {

/// Connection lines of one kind: how many, where the first was, on which hosts (the first 8).
struct Tally {
    std::uint64_t count = 0;
    Mark first;
    std::set<std::string> hosts;
    void add(std::uint64_t n, Mark where, const std::string& host);
};

/// What one job's log shows, as its rules read it: the tallies of its communicators and the facts
/// of its inputs.
struct JobEvidence {
    JobEvidence(const InputFacts& f, const Job& j, std::function<Where(Mark)> w) : facts(f), job(j), where(std::move(w))
    {
    }

    const InputFacts& facts;
    const Job& job;
    std::function<Where(Mark)> where; ///< a mark as the file and line it names
    Tally shm; ///< SHM between GPUs of one host
    Tally socket; ///< NET/Socket between hosts
    Tally ib_no_gdr; ///< NET/IB without GDRDMA
    Tally indirect; ///< P2P/indirect
    Tally ring_cross; ///< rings that cross hosts more than needed
    std::string ring_detail; ///< the first such ring, in words
    Tally mismatch; ///< communicators whose processes print different NCCL versions
    std::string mismatch_detail;
    Tally incomplete; ///< ranks with Init START and no Init COMPLETE
    std::string incomplete_detail; ///< the first few, in words
};

/// One finding code of nccl-log and the rule that makes its findings from one job's evidence.
struct JobRule {
    FindingCode code;
    void (*judge)(const JobEvidence& evidence, const FindingCode& code, std::vector<Finding>& out);
};

/// The rules, in the order their findings are listed (before they are sorted by severity).
const std::vector<JobRule>& job_rules();

/// The row of nccl.truncated: what a reading past its limits left out (not a job's finding).
const FindingCode& truncated_code();

/// A finding of `code` with where its first line was and how many lines show it.
Finding make_finding(const FindingCode& code, std::string subject, std::string message, Where where,
    std::uint64_t count, nlohmann::json facts = nullptr);

/// "3 ranks", "1 rank".
std::string plural(std::uint64_t n, const char* one, const char* many);

} // namespace base::nccl
