# rb_threads.rb - two named Ruby threads beside the main one. Prints each
# Thread object's inspect (which shows the object's address), then 'ready',
# and sleeps until killed.
q = Queue.new
%w[worker-a worker-b].each do |name|
  Thread.new do
    Thread.current.name = name
    q << Thread.current.inspect
    sleep
  end
end
lines = [Thread.current.inspect] + Array.new(2) { q.pop }
lines.each { |l| puts "thread #{l}" }
puts 'ready'
$stdout.flush
sleep
