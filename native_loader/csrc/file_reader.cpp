// Local file reads into the same buffer type the S3 engine produces.
#include "file_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace nl {

FileRead read_file(const std::string &path, int64_t offset, int64_t length) {
    FileRead out;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        out.error = errno;
        return out;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        out.error = errno;
        ::close(fd);
        return out;
    }
    if (S_ISDIR(st.st_mode)) {
        out.error = EISDIR;
        ::close(fd);
        return out;
    }
    out.file_size = st.st_size;
    out.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    int64_t start = std::min<int64_t>(offset, st.st_size);
    int64_t end = length < 0 ? st.st_size : std::min<int64_t>(st.st_size, offset + length);
    int64_t n = std::max<int64_t>(0, end - start);
    auto data = std::make_shared<Storage>(static_cast<size_t>(n));
    int64_t done = 0;
    while (done < n) {
        ssize_t r = ::pread(fd, data->data + done, static_cast<size_t>(n - done), start + done);
        if (r < 0) {
            if (errno == EINTR) continue;
            out.error = errno;
            ::close(fd);
            return out;
        }
        if (r == 0) break;  // the file shrank under us
        done += r;
    }
    struct stat after {};
    if (::fstat(fd, &after) == 0) {
        out.size_after = after.st_size;
        out.mtime_ns_after =
            static_cast<int64_t>(after.st_mtim.tv_sec) * 1000000000 + after.st_mtim.tv_nsec;
    }
    ::close(fd);
    if (done < n) {
        auto shorter = std::make_shared<Storage>(static_cast<size_t>(done));
        std::copy(data->data, data->data + done, shorter->data);
        data = shorter;
    }
    out.data = std::move(data);
    return out;
}

}  // namespace nl
