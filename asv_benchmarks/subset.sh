# Sourced by check.sh and history.sh: the focused benchmark subsets both run (asv -b regex).
# Window reads and the full image at 1 and 2 threads, write at 1 and 2 threads (tile and
# cell frames), cold start (import, open, first 64 x 64 read), one blob parse and a
# 1,000,000-blob catalog parse.
QUICK_BENCH='WindowReadThreads\.time_read|WriteThreads\.time_write|ColdStart\.timeraw_import_open_read_64|BlobParse\.time_parse_one$|BlobBatch\.time_parse_blobs_arrow_column'

# The engine against its decode floor (bench_floor: read time / decode-only time of the same frames, per
# row, default and fast frames, 1 and 2 threads): track_ benchmarks compared with a tighter factor of
# their own (check.sh's RATIO_FACTOR), since a ratio measured inside one process moves little with the machine.
QUICK_RATIOS='DecodeFloorRatio\.track_read_over_decode'

# asv needs a machine description once per machine; record this one if there is none yet.
ensure_machine() {
    [ -f "${ASV_MACHINE_FILE:-$HOME/.asv-machine.json}" ] || asv machine --yes >/dev/null
}
