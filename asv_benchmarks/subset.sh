# Sourced by check.sh and history.sh: the focused benchmark subset both run (asv -b regex).
# Window reads and the full image at 1 and 2 threads, write at 1 and 2 threads (tile and
# cell frames), cold start (import, open, first 64 x 64 read), one blob parse and a
# 1,000,000-blob catalog parse.
QUICK_BENCH='WindowReadThreads\.time_read|WriteThreads\.time_write|ColdStart\.timeraw_import_open_read_64|BlobParse\.time_parse_one$|BlobBatch\.time_parse_blobs_arrow_column'

# asv needs a machine description once per machine; record this one if there is none yet.
ensure_machine() {
    [ -f "${ASV_MACHINE_FILE:-$HOME/.asv-machine.json}" ] || asv machine --yes >/dev/null
}
