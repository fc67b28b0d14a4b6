// Local file reads into the same buffer type the S3 engine produces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "buffer.hpp"

namespace nl {

struct FileRead {
    std::shared_ptr<Storage> data;  // null on error
    int error = 0;                  // errno on failure
    int64_t file_size = -1;
    // The file's modification time (ns) when it was opened, and its size and modification time
    // once the range was read (fstat on the same descriptor): a file rewritten while it is read
    // differs. They stand for an object's ETag, without the GIL.
    int64_t mtime_ns = -1;
    int64_t size_after = -1;
    int64_t mtime_ns_after = -1;
};

// Reads [offset, offset + length) of a file (length < 0: to the end). A range past the end is
// cut short, like a POSIX read.
FileRead read_file(const std::string &path, int64_t offset, int64_t length);

}  // namespace nl
