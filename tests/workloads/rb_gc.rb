# rb_gc.rb - a thread named churn that allocates without pause while a
# large set of strings stays alive, so that the GC runs often and each run
# has much to mark and sweep. Prints 'ready'; then, for each line read on
# standard input, 'gc NS cpu NS': the GC's time so far (GC.total_time) and
# the churn thread's CPU time, both in nanoseconds. Exits at end of input.
KEEP = Array.new(300_000) { |i| "kept #{i}" }

def churn(n)
  Array.new(n) { |i| "s#{i}" } # LINE:churn
end

cpu = Queue.new
worker = Thread.new do
  Thread.current.name = 'churn'
  loop do
    churn(1000)
    # Its CPU time, read on its own thread when asked.
    next unless $asked
    $asked = false
    cpu << Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
  end
end
puts 'ready'
$stdout.flush
while $stdin.gets # LINE:read
  $asked = true
  ns = cpu.pop # LINE:pop
  puts "gc #{GC.total_time} cpu #{ns}" # LINE:answer
  $stdout.flush
end
worker.kill
