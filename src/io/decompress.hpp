// Private helpers: gzip / zstd / xz detection by magic bytes, whole-buffer decompression with
// errors that name the file, and the compressors the baselines and tests use (zlib, libzstd, liblzma).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace eggroll::detail {

enum class Compression { none, gzip, zstd, xz };

// The format named by the first bytes: gzip 1f 8b, zstd 28 b5 2f fd, xz fd 37 7a 58 5a 00;
// anything else is none. The file name's extension is never consulted.
Compression detect_compression(std::string_view data);
const char* compression_name(Compression c);

// Decompresses a whole buffer (concatenated gzip members / zstd frames / xz streams included).
// A corrupt or truncated input throws Error naming `source` (a file path, for the message).
std::string decompress(std::string_view data, Compression c, const std::string& source);

// Compressors. gzip_compress writes a gzip stream (zlib deflate with the gzip wrapper: 10-byte
// header without file name, 8-byte CRC32 + size trailer), as `gzip -<level>` would modulo the name.
std::string gzip_compress(std::string_view data, int level);
// zstd frame with a content checksum (as the zstd tool writes).
std::string zstd_compress(std::string_view data, int level);
// xz container via lzma_easy_buffer_encode(preset, LZMA_CHECK_CRC64), as `xz -<preset>`.
std::string xz_compress(std::string_view data, std::uint32_t preset);

}  // namespace eggroll::detail
