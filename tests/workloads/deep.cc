// deep.cc - a C++ call chain hundreds of frames deep under a Python caller
// (tests/functional/test_native.py): deep_spin(depth, ms) recurses through
// Level<N>::down, alternating two template instances, to depth frames,
// then spins for ms milliseconds at the bottom.
#include <chrono>

namespace {

volatile unsigned long sink;

template <int N> struct Level {
	__attribute__((noinline)) static unsigned long down(int depth, double ms);
};

__attribute__((noinline)) unsigned long spin(double ms)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
	unsigned long n = 0;
	while (std::chrono::steady_clock::now() < end)
		sink = ++n;
	return n;
}

template <int N> unsigned long Level<N>::down(int depth, double ms)
{
	unsigned long r = depth <= 1 ? spin(ms) : Level<1 - N>::down(depth - 1, ms);
	sink = r + static_cast<unsigned long>(depth); // work after the call: no tail call
	return r + 1;
}

} // namespace

extern "C" unsigned long deep_spin(int depth, double ms)
{
	return Level<0>::down(depth, ms);
}
