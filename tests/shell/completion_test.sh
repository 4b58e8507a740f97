#!/usr/bin/env bash
# The bash completions of share/bash-completion/completions, sourced in a non-interactive bash
# with the built gpurun and gpudoctor on PATH: COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT set as
# readline would, the completion function called, COMPREPLY read.
# usage: completion_test.sh SOURCE_DIR GPURUN GPUDOCTOR
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
source_dir=$1
PATH=$(dirname "$2"):$(dirname "$3"):$PATH
export PATH
# The gpurun file loads the gpudoctor one (the shared helpers) from beside itself.
# shellcheck source=/dev/null
. "$source_dir/share/bash-completion/completions/gpurun"

# reply_for FUNCTION WORD...: COMPREPLY, sorted, one line, for the cursor at the end of the last
# word ("" to complete a new word).
reply_for() {
    local fn=$1
    shift
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="${COMP_WORDS[*]}"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    "$fn"
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}

expect_eq "registered for both programs" "complete -F _gpudoctor gpudoctor|complete -F _gpurun gpurun" \
    "$(complete -p gpudoctor gpurun | tr '\n' '|' | sed 's/|$//')"

# gpudoctor: subcommands from its --help (monitor and profile included, nothing hard-wired).
expect_eq "gpudoctor ex<TAB>" "explain" "$(reply_for _gpudoctor gpudoctor ex)"
expect_eq "gpudoctor <TAB>" "check explain fit fleet list monitor nccl-log profile snapshot topo" \
    "$(reply_for _gpudoctor gpudoctor '')"
expect_eq "gpudoctor --ver<TAB>" "--version" "$(reply_for _gpudoctor gpudoctor --ver)"
# Finding codes from `gpudoctor list --codes`.
codes=$(gpudoctor list --codes | awk '$1 ~ /^gpus\.ecc/ { print $1 }' | sort | tr '\n' ' ' | sed 's/ $//')
expect_contains "gpus.ecc codes exist" "gpus.ecc_uncorrected" "$codes"
expect_eq "gpudoctor explain gpus.ecc<TAB>" "$codes" "$(reply_for _gpudoctor gpudoctor explain gpus.ecc)"
expect_eq "gpudoctor explain nccl.ib_w<TAB>" "nccl.ib_without_gdr" "$(reply_for _gpudoctor gpudoctor explain nccl.ib_w)"
# Probe names from `gpudoctor list`, one word of a comma-separated list at a time.
expect_eq "check --only n<TAB>" "nccl-env network" "$(reply_for _gpudoctor gpudoctor check --only n)"
expect_eq "check --only ne<TAB>" "network" "$(reply_for _gpudoctor gpudoctor check --only ne)"
expect_eq "check --skip gpus,nc<TAB>" "gpus,nccl-env" "$(reply_for _gpudoctor gpudoctor check --skip gpus,nc)"
expect_eq "check --only=b<TAB> (split at =)" "bandwidth binding" "$(reply_for _gpudoctor gpudoctor check --only = b)"
expect_eq "check --only=b<TAB> (one word)" "--only=bandwidth --only=binding" \
    "$(reply_for _gpudoctor gpudoctor check --only=b)"
expect_eq "--only before any subcommand means check" "driver" "$(reply_for _gpudoctor gpudoctor --only dr)"
# Options of each subcommand from its --help.
expect_eq "check --pr<TAB>" "--prometheus" "$(reply_for _gpudoctor gpudoctor check --pr)"
expect_eq "check --ju<TAB>" "--junit" "$(reply_for _gpudoctor gpudoctor check --ju)"
expect_eq "check --fa<TAB>" "--fail-summary" "$(reply_for _gpudoctor gpudoctor check --fa)"
expect_eq "nccl-log --fail-on <TAB>" "fail warn" "$(reply_for _gpudoctor gpudoctor nccl-log --fail-on '')"
expect_eq "profile --m<TAB>" "--min-busy" "$(reply_for _gpudoctor gpudoctor profile --m)"
expect_eq "monitor --in<TAB>" "--interval" "$(reply_for _gpudoctor gpudoctor monitor --in)"
expect_eq "list --<TAB>" "--codes --help --json --no-color" "$(reply_for _gpudoctor gpudoctor list --)"
expect_eq "fleet --h<TAB>" "--healthy-hostfile --help --host --hostfile" "$(reply_for _gpudoctor gpudoctor fleet --h)"
expect_eq "fleet --launcher <TAB>" "auto local mpich openmpi srun" "$(reply_for _gpudoctor gpudoctor fleet --launcher '')"
expect_eq "fleet --an<TAB>: the node's side is not offered" "" "$(reply_for _gpudoctor gpudoctor fleet --an)"
expect_eq "fit --model bert<TAB>" "bert-base bert-large" "$(reply_for _gpudoctor gpudoctor fit --model bert)"
expect_eq "fit --gpu-model K80,V100-3<TAB>" "K80,V100-32GB" "$(reply_for _gpudoctor gpudoctor fit --gpu-model K80,V100-3)"
expect_eq "fit --precision <TAB>" "amp bf16 bf16-pure fp16 fp16-pure fp32" "$(reply_for _gpudoctor gpudoctor fit --precision '')"
expect_eq "fit --attention <TAB>" "eager flash sdpa" "$(reply_for _gpudoctor gpudoctor fit --attention '')"
expect_eq "fit --loss <TAB>" "chunked fp32 fused" "$(reply_for _gpudoctor gpudoctor fit --loss '')"
expect_eq "fit --norm <TAB>" "layer rms" "$(reply_for _gpudoctor gpudoctor fit --norm '')"
expect_eq "fit --gpu-mem a<TAB> (SIZE|auto)" "auto" "$(reply_for _gpudoctor gpudoctor fit --gpu-mem a)"
expect_eq "a numeric value has no completion" "" "$(reply_for _gpudoctor gpudoctor check --timeout '')"

# Files where a FILE is expected: options typed FILE and the positional files of nccl-log.
mkdir -p "$scratch/logs"
touch "$scratch/job.log" "$scratch/jobs.txt" "$scratch/node.xml"
expect_eq "nccl-log FILE" "$scratch/job.log $scratch/jobs.txt" "$(reply_for _gpudoctor gpudoctor nccl-log "$scratch/jo")"
expect_eq "check --topology FILE" "$scratch/node.xml" "$(reply_for _gpudoctor gpudoctor check --topology "$scratch/n")"
expect_eq "check --sysroot DIR" "$scratch/logs" "$(reply_for _gpudoctor gpudoctor check --sysroot "$scratch/l")"
expect_eq "check --prometheus FILE" "$scratch/node.xml" \
    "$(reply_for _gpudoctor gpudoctor check --prometheus "$scratch/no")"
expect_eq "explain takes no file" "" "$(reply_for _gpudoctor gpudoctor explain "$scratch/jo")"
# A command after "--".
expect_contains "monitor -- tru<TAB>" "true" "$(reply_for _gpudoctor gpudoctor monitor -- tru)"

# gpurun: option values, options from --help, and the program after the options.
expect_eq "gpurun --bind <TAB>" "cores none numa socket" "$(reply_for _gpurun gpurun --bind '')"
expect_eq "gpurun --mem-bind s<TAB>" "strict" "$(reply_for _gpurun gpurun --mem-bind s)"
expect_eq "gpurun --gpu-visibility <TAB>" "all isolate" "$(reply_for _gpurun gpurun --gpu-visibility '')"
expect_eq "gpurun --enforce <TAB>" "kill warn" "$(reply_for _gpurun gpurun --monitor --enforce '')"
expect_eq "gpurun --launcher <TAB>" "auto local mpich openmpi srun" "$(reply_for _gpurun gpurun --launcher '')"
expect_eq "gpurun --nic-binding n<TAB>" "nccl none" "$(reply_for _gpurun gpurun --nic-binding n)"
expect_eq "gpurun --nccl-check=<TAB> (split)" "end init" "$(reply_for _gpurun gpurun --nccl-check = '')"
expect_eq "gpurun --nccl-check=i<TAB> (one word)" "--nccl-check=init" "$(reply_for _gpurun gpurun --nccl-check=i)"
expect_eq "gpurun --mon<TAB>" "--monitor --monitor-json" "$(reply_for _gpurun gpurun --mon)"
expect_eq "gpurun --prof<TAB>" "--profile --profile-dir --profile-ranks" "$(reply_for _gpurun gpurun --prof)"
expect_eq "gpurun --profile <TAB>" "nsys" "$(reply_for _gpurun gpurun --profile '')"
expect_eq "gpurun -n<TAB>" "-n -np" "$(reply_for _gpurun gpurun -n)"
expect_eq "gpurun --topology FILE" "$scratch/node.xml" "$(reply_for _gpurun gpurun --topology "$scratch/n")"
expect_eq "gpurun --hostfile FILE" "$scratch/job.log $scratch/jobs.txt" \
    "$(reply_for _gpurun gpurun -np 2 --hostfile "$scratch/jo")"
export GPUKIT_COMPLETION_TEST_VAR=1
expect_eq "gpurun -x GPUKIT_COMPLETION_T<TAB>" GPUKIT_COMPLETION_TEST_VAR \
    "$(reply_for _gpurun gpurun -x GPUKIT_COMPLETION_T)"
# The program: after -np's value, after --nccl-check without "=", after "--".
expect_contains "gpurun -np 2 tru<TAB>" "true" "$(reply_for _gpurun gpurun -np 2 tru)"
expect_contains "gpurun --nccl-check tru<TAB>" "true" "$(reply_for _gpurun gpurun --nccl-check tru)"
expect_contains "gpurun --bind=numa -- tru<TAB>" "true" "$(reply_for _gpurun gpurun --bind = numa -- tru)"
# The program's own options are not gpurun's.
expect_not_contains "after the program" "--bind" "$(reply_for _gpurun gpurun -np 2 ./app --b)"
expect_eq "the program's file arguments" "$scratch/job.log $scratch/jobs.txt" \
    "$(reply_for _gpurun gpurun -np 2 python "$scratch/jo")"

finish
