// hand.cu: the judge's reads of a call's outputs (see hand.h).
#include <cstring>

#include "hand.h"

namespace kit {

Hand::Hand(const Arrays& a, Memory m)
    : arrays_(a), memory_(m), pos_(a.specs.size()), dpos_(a.specs.size()), hbuf_(a.specs.size()), dbuf_(a.specs.size()) {
    if (memory_ != Memory::device) return;
    for (size_t i = 0; i < a.specs.size(); ++i) {
        const ArraySpec& s = a.specs[i];
        if (!is_output(s)) continue;
        CUDA_CHECK(cudaSetDevice(s.device));
        CUDA_CHECK(cudaMalloc(&dpos_[i], kProbeCount * sizeof(size_t)));
        CUDA_CHECK(cudaHostAlloc(&hbuf_[i], kProbeCount * dtype_size(s.dtype), cudaHostAllocMapped | cudaHostAllocPortable));
        CUDA_CHECK(cudaHostGetDevicePointer(&dbuf_[i], hbuf_[i], 0));
    }
    CUDA_CHECK(cudaSetDevice(0));
}

Hand::~Hand() {
    for (size_t i = 0; i < dpos_.size(); ++i) {
        if (dpos_[i]) cudaFree(dpos_[i]);
        if (hbuf_[i]) cudaFreeHost(hbuf_[i]);
    }
}

void Hand::aim(const Positions& p) {
    pos_ = p;
    if (memory_ != Memory::device) return;
    for (size_t i = 0; i < p.size(); ++i)
        if (dpos_[i] && !p[i].empty())
            CUDA_CHECK(cudaMemcpy(dpos_[i], p[i].data(), p[i].size() * sizeof(size_t), cudaMemcpyHostToDevice));
}

void Hand::take() {
    if (memory_ == Memory::host) {
        held_.resize(pos_.size());
        for (size_t i = 0; i < pos_.size(); ++i) {
            const size_t es = dtype_size(arrays_.specs[i].dtype);
            held_[i].resize(pos_[i].size() * es);
            for (size_t j = 0; j < pos_[i].size(); ++j)
                std::memcpy(&held_[i][j * es], (const char*)arrays_.ptrs[i] + pos_[i][j] * es, es);
        }
        return;
    }
    for (size_t i = 0; i < pos_.size(); ++i) {
        if (!dpos_[i] || pos_[i].empty()) continue;
        CUDA_CHECK(cudaSetDevice(arrays_.specs[i].device));
        gather_async(arrays_.specs[i], arrays_.ptrs[i], dpos_[i], pos_[i].size(), dbuf_[i]);
    }
    settle_or_throw("the judge's read");
}

std::vector<std::vector<unsigned char>> Hand::values() const {
    if (memory_ == Memory::host) return held_;
    std::vector<std::vector<unsigned char>> v(pos_.size());
    for (size_t i = 0; i < pos_.size(); ++i)
        if (hbuf_[i]) {
            const size_t bytes = pos_[i].size() * dtype_size(arrays_.specs[i].dtype);
            v[i].assign((const unsigned char*)hbuf_[i], (const unsigned char*)hbuf_[i] + bytes);
        }
    return v;
}

}  // namespace kit
