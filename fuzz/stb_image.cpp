// stb_image compiled from Debian's header into fuzz_image, so that the decoders carry libFuzzer's
// coverage counters and the sanitizers' checks like ember's own code. Debian's prebuilt
// libstb.so has neither: libFuzzer would see nothing of the code it is meant to explore, and
// ASan only the allocations. These definitions take precedence over libstb.so's, since an
// executable's symbols come before a shared library's.
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
