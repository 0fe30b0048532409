/* rb_cext.c - a Ruby C extension for the Ruby tests (test_ruby.py builds
 * it): CExt.call_back(v) { |v| ... } calls its block from C, through
 * rbcext_call_back, whose frame stays (no sibling call). */
#include <ruby.h>

__attribute__((noinline)) VALUE rbcext_call_back(VALUE self, VALUE v)
{
	VALUE r = rb_yield(v);
	RB_GC_GUARD(self);
	return r;
}

void Init_rb_cext(void)
{
	VALUE m = rb_define_module("CExt");
	rb_define_module_function(m, "call_back", rbcext_call_back, 1);
}
