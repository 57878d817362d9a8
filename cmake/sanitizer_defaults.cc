// The sanitizers' default options, compiled into every executable of a sanitizer build
// (cmake/sanitizers.cmake): the tests, the launcher the e2e suite starts and a binary run by hand
// all behave alike. The ASAN_OPTIONS / UBSAN_OPTIONS / TSAN_OPTIONS variables still override them.
// The runtimes call these before main; the ones of a sanitizer not linked in are never called.

extern "C" {

// check_initialization_order + strict_init_order: a global initialised from another file's global.
const char* __asan_default_options() {
  return "detect_leaks=1:check_initialization_order=1:strict_init_order=1";
}

// Every UBSan check is built with -fno-sanitize-recover: the first finding aborts with its stack.
const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// second_deadlock_stack: both stacks of a lock-order inversion.
const char* __tsan_default_options() { return "second_deadlock_stack=1:halt_on_error=1"; }

}  // extern "C"
