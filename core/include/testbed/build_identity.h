// What a plugin and the core must share, beyond the ABI version, for C++ values (std::string,
// std::function, absl::Status) to cross between them: the testbed version whose headers it
// was compiled against, the compiler family and major version, the C++ library and its ABI,
// and the Abseil release and inline namespace. PluginInfo carries the plugin's; the loader
// compares it with its own and refuses a mismatch, naming both.
#pragma once

#include "absl/base/config.h"
#include "testbed/version.h"

#define TESTBED_IDENTITY_STR_(x) #x
#define TESTBED_IDENTITY_STR(x) TESTBED_IDENTITY_STR_(x)

#if defined(__clang__)
#define TESTBED_IDENTITY_COMPILER "clang " TESTBED_IDENTITY_STR(__clang_major__)
#elif defined(__GNUC__)
#define TESTBED_IDENTITY_COMPILER "gcc " TESTBED_IDENTITY_STR(__GNUC__)
#else
#define TESTBED_IDENTITY_COMPILER "unknown compiler"
#endif

#if defined(_LIBCPP_VERSION)
#define TESTBED_IDENTITY_STDLIB "libc++ " TESTBED_IDENTITY_STR(_LIBCPP_VERSION)
#elif defined(_GLIBCXX_RELEASE)
#define TESTBED_IDENTITY_STDLIB \
  "libstdc++ " TESTBED_IDENTITY_STR(_GLIBCXX_RELEASE) " cxx11-abi " TESTBED_IDENTITY_STR(_GLIBCXX_USE_CXX11_ABI)
#else
#define TESTBED_IDENTITY_STDLIB "unknown C++ library"
#endif

#if defined(ABSL_LTS_RELEASE_VERSION)
#define TESTBED_IDENTITY_ABSL \
  "abseil " TESTBED_IDENTITY_STR(ABSL_LTS_RELEASE_VERSION) " " TESTBED_IDENTITY_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME)
#else
#define TESTBED_IDENTITY_ABSL "abseil head " TESTBED_IDENTITY_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME)
#endif

// "testbed 0.1.0; gcc 12; libstdc++ 12 cxx11-abi 1; abseil 20220623 debian3"
#define TESTBED_BUILD_IDENTITY \
  "testbed " TESTBED_VERSION "; " TESTBED_IDENTITY_COMPILER "; " TESTBED_IDENTITY_STDLIB "; " TESTBED_IDENTITY_ABSL
