# rb_frames.rb - Ruby threads stopped in known call chains: an instance
# method, a method that yields, a block, a module's singleton method. Each
# thread prints its own caller_locations(0) on the line where it then
# sleeps, so that a reading of the sleeping thread must give the same
# frames. Prints 'stack TAG' then one 'at LABEL<tab>PATH<tab>LINE' line
# per frame, for each thread, then 'ready', and sleeps until killed. The
# threads are named chain-a and chain-b.
module Greeter
  def self.wait(q, tag)
    q << [tag, caller_locations(0).map { |l| [l.label, l.path, l.lineno] }]; sleep # LINE:wait
  end
end

class Outer
  def run(q, tag)
    # Lines enough that the call below sits past the first 54 positions of
    # the instruction table: its line comes from the bit vector's blocks.
    n = 0
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    n += tag.size
    inner { Greeter.wait(q, tag) } # LINE:block
  end

  def inner
    yield # LINE:yield
  end
end

def deeper(q, tag, n)
  return Outer.new.run(q, tag) if n.zero? # LINE:run
  deeper(q, tag, n - 1) # LINE:deeper
end

q = Queue.new
Thread.new { Thread.current.name = 'chain-a'; Outer.new.run(q, 'a') }
Thread.new { Thread.current.name = 'chain-b'; deeper(q, 'b', 30) }
stacks = Array.new(2) { q.pop }
Thread.new do
  stacks.sort.each do |tag, locs|
    puts "stack #{tag}"
    locs.each { |label, path, line| puts "at #{label}\t#{path}\t#{line}" }
  end
  puts 'ready'
  $stdout.flush
end.join
sleep
