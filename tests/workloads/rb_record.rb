# rb_record.rb - Ruby threads in known chains, for the recording tests
# (tests/functional/test_ruby.py): two named workers compute through a
# module method called from a block that Array#sort_by calls back, and a
# named thread sleeps. Each worker prints its own caller_locations(0) from
# its first call of Work.hot ("stack NAME", then "at LABEL<tab>PATH<tab>LINE"
# lines); "ready" follows once every thread is named and both have, then it
# runs until killed. The LINE marks name the lines the tests expect.
$stdout.sync = true
PRINT = Mutex.new

module Shapes
  def self.area(n)
    Work.hot(n) # LINE:area
  end
end

class Work
  def self.hot(n) # LINE:def-hot
    if Thread.current[:report] # LINE:hot-callout
      Thread.current[:report] = false
      stack = caller_locations(0)
      PRINT.synchronize do
        puts "stack #{Thread.current.name}"
        stack.each { |l| puts "at #{l.label}\t#{l.path}\t#{l.lineno}" }
      end
      Thread.current[:reported] << 1
    end
    x = 0
    i = 0
    while i < n # LINE:hot-a
      x += i * i # LINE:hot-b
      i += 1 # LINE:hot-c
    end
    x # LINE:hot-d
  end

  def sorter
    [3, 1, 2].sort_by { |v| Shapes.area(20_000) + v } # LINE:sorter
  end
end

named = Queue.new
2.times do |i|
  Thread.new do
    Thread.current.name = "worker-#{i}"
    Thread.current[:report] = true
    Thread.current[:reported] = named
    w = Work.new
    loop { w.sorter } # LINE:worker
  end
end
Thread.new do
  Thread.current.name = "sleeper"
  named << :s
  sleep # LINE:sleeper
end
3.times { named.pop }
puts "ready"
sleep # LINE:main
