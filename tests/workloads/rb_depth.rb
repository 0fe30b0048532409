# rb_depth.rb N - a Ruby thread N calls deep in rec, spinning in spin for
# ever: its stack is <main>, rec N + 1 times, spin. Prints "ready" first.
# For the depth tests (tests/functional/test_ruby.py) and bench/ruby_depth.py.
$stdout.sync = true

def spin
  x = 0
  while true # LINE:spin-loop
    x += 1 # LINE:spin
  end
end

def rec(n)
  n > 0 ? rec(n - 1) : spin # LINE:rec
end

puts "ready"
rec(Integer(ARGV.fetch(0, "10")))
