// The conv1d CPU reference, shared by the checker and the C++ tests,
// and the sequential loop that defines the answer (quoted by the handout).
#pragma once

// P[i] = sum_j N[i - w/2 + j] * M[j], N read as 0 outside [0, n); sums in double.
void conv1d_cpu(int n, int w, const float* N, const float* M, float* P);

// handout: begin
// N is read as 0 outside [0, n). The truth sums in double; FP32 sums in any order pass.
inline void conv1d_sequential(int n, int w, const float* N, const float* M, float* P) {
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < w; j++) {
            int k = i - w / 2 + j;
            if (k >= 0 && k < n) s += (double)N[k] * M[j];
        }
        P[i] = (float)s;
    }
}
// handout: end
