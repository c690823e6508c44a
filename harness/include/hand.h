// hand.h: the judge's hand, what it reads of a call's outputs itself (checker side only).
#pragma once

#include "shared_arrays.h"

namespace kit {

// What the judge reads of a timed run's outputs, at the positions it has drawn. On the GPU the
// positions go up before the clock starts, and the gather writes straight into mapped pinned memory:
// taking the outputs in hand is one launch per output and one wait.
class Hand {
public:
    Hand(const Arrays& arrays, Memory memory);
    ~Hand();
    Hand(const Hand&) = delete;
    Hand& operator=(const Hand&) = delete;

    void aim(const Positions& p);  // untimed: where the next take() reads
    void take();                   // timed: returns with the values at those positions in hand
    std::vector<std::vector<unsigned char>> values() const;  // untimed: what the last take() read

private:
    const Arrays& arrays_;
    Memory memory_;
    Positions pos_;
    std::vector<size_t*> dpos_;
    std::vector<void*> hbuf_, dbuf_;
    std::vector<std::vector<unsigned char>> held_;
};

}  // namespace kit
