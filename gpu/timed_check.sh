# Sourced by gpu/check_h200.sh and gpu/check_model_h200.sh, after they set
# $work and $summary.
# timed NAME LIMIT ARGS...: `check ARGS`, its stdout in $work/NAME.txt and
# stderr in $work/NAME-log.txt; one line with its exit code and time is added
# to $summary.
timed() {
    local name=$1 limit=$2 start end code seconds
    shift 2
    start=$(date +%s%N)
    timeout "$limit" python3 -m executorch_device_guard check "$@" \
        >"$work/$name.txt" 2>"$work/$name-log.txt"
    code=$?
    end=$(date +%s%N)
    seconds=$(awk -v ns=$((end - start)) 'BEGIN { printf "%.1f", ns / 1e9 }')
    echo "$name: check $*: exit $code, $seconds s" | tee -a "$summary"
}
