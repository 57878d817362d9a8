# XGrammar's C++ core (constrained decoding for src/grammar/), built from the pinned sdist that
# scripts/fetch_xgrammar.sh unpacks and patches into .cache/. We compile its cpp/*.cc ourselves
# instead of add_subdirectory: its CMakeLists sets directory-wide -Werror -flto=auto and defaults
# to the Python bindings. Its own code keeps its own flags (no lm_warnings) and its headers are
# SYSTEM, so its warnings never meet our -Werror.
set(LM_XGRAMMAR_SOURCE_DIR ${PROJECT_SOURCE_DIR}/.cache/xgrammar-0.2.8 CACHE PATH
    "XGrammar 0.2.8 sources (scripts/fetch_xgrammar.sh)")
# The marker is written last, after every patch applied: without it the tree is not ours to build.
if(NOT EXISTS ${LM_XGRAMMAR_SOURCE_DIR}/.unpacked)
  message(FATAL_ERROR "XGrammar sources not found (or not patched) in ${LM_XGRAMMAR_SOURCE_DIR}: "
                      "run scripts/fetch_xgrammar.sh (make does)")
endif()
file(GLOB_RECURSE xgrammar_sources CONFIGURE_DEPENDS ${LM_XGRAMMAR_SOURCE_DIR}/cpp/*.cc)
list(FILTER xgrammar_sources EXCLUDE REGEX "/cpp/tvm_ffi/.*\\.cc$")
add_library(xgrammar STATIC ${xgrammar_sources})
set_target_properties(xgrammar PROPERTIES CXX_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
target_include_directories(xgrammar SYSTEM PUBLIC
  ${LM_XGRAMMAR_SOURCE_DIR}/include
  ${LM_XGRAMMAR_SOURCE_DIR}/3rdparty/picojson
  ${LM_XGRAMMAR_SOURCE_DIR}/3rdparty/dlpack/include)
target_include_directories(xgrammar PRIVATE ${LM_XGRAMMAR_SOURCE_DIR}/cpp)
# XGRAMMAR_LOG_CUSTOMIZE: its log messages go to src/grammar/xgrammar_log_sink.cc, which turns
# the warnings of a compile (what XGrammar could not enforce) into a refusal.
target_compile_definitions(xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0
                                           XGRAMMAR_ENABLE_INTERNAL_CHECK=0 XGRAMMAR_LOG_CUSTOMIZE=1)
target_compile_options(xgrammar PRIVATE -O2 -w)
target_link_libraries(xgrammar PUBLIC Threads::Threads)
