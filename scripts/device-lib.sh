# Shared by the device-run scripts (sourced, not run): unpacks the xz-compressed release
# binaries carried in .dev/bin to /tmp/bin, records the GPU, and defines `step NAME CMD...`
# (runs CMD with its output in $R/NAME.log, logs start and exit in $R/summary.txt, returns
# CMD's exit status) and `pack`
# (tars $R into $OUT/results.tar.gz after every step, so a run cut off by the time limit
# still returns what it has: the device returns only a few loose files per call).
# Expects R (the run folder, whose parent is tarred) to be set by the caller.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}
mkdir -p "$R" /tmp/bin
for f in .dev/bin/*.xz; do
    b=/tmp/bin/$(basename "$f" .xz)
    [ -x "$b" ] || { xz -dc "$f" > "$b" && chmod +x "$b"; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/gpu.txt" 2>&1
pack() { tar -czf "$OUT/results.tar.gz" -C "$(dirname "$R")" "$(basename "$R")"; }
step() {
    local name=$1; shift
    echo "[$(date +%T)] $name: $*" | tee -a "$R/summary.txt"
    "$@" < /dev/null > "$R/$name.log" 2>&1
    local rc=$? # before any command substitution resets $?
    echo "[$(date +%T)] $name: exit $rc | $(tail -n 2 "$R/$name.log" | command tr '\n' ' ')" | tee -a "$R/summary.txt"
    pack
    return $rc
}
