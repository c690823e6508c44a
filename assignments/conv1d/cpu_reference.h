// The conv1d CPU reference, shared by the checker and the C++ tests.
#pragma once

// P[i] = sum_j N[i - w/2 + j] * M[j], N read as 0 outside [0, n); sums in double.
void conv1d_cpu(int n, int w, const float* N, const float* M, float* P);
