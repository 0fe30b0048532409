# rb_cext.rb EXT - Ruby calling a C extension (tests/workloads/rb_cext.c,
# built at EXT by the test) that calls back into Ruby: <main>, outer,
# CExt.call_back and its C function, rb_yield, the block, inner, hot.
# Prints "ready", then runs until killed.
$stdout.sync = true
require ARGV.fetch(0)

def hot
  x = 0
  i = 0
  while i < 20_000 # LINE:hot-a
    x += i # LINE:hot-b
    i += 1 # LINE:hot-c
  end
  x # LINE:hot-d
end

def inner(v)
  hot + v # LINE:inner
end

def outer
  CExt.call_back(1) { |v| inner(v) } # LINE:outer
end

puts "ready"
loop { outer } # LINE:main
