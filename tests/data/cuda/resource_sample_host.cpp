// Input of the resource check's self-test: a host-only member of the archive (no device code), as
// the CUDA library's .cpp files are.
int resource_sample_host(int x) { return 2 * x; }
