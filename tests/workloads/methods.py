# methods.py - methods named by their class on every version: from the
# code object's qualified name on 3.11+, from the first local (self or cls)
# up to 3.10. Busy in turn in:
#   Shape.area      a method (self), alone and at the bottom of Shape.nest
#   Shape.build     a classmethod (cls)
#   helper          a function whose first argument is a Shape, called obj:
#                   not a method, so never Shape.helper
#   Shape.nest      a method calling itself on the same self, 8 deep
# Usage: python methods.py SECONDS. Prints "ready" once the loop runs.
import sys
import time


class Shape(object):
    def area(self, k):
        x = 0
        for i in range(k):  # LINE:area
            x += i
        return x

    @classmethod
    def build(cls, k):
        x = 0
        for i in range(k):  # LINE:build
            x += i
        return x

    def nest(self, depth, k):
        if depth:
            return self.nest(depth - 1, k)  # LINE:nest
        return self.area(k)  # LINE:nest-area


def helper(obj, k):
    x = 0
    for i in range(k):  # LINE:helper
        x += i
    return x


def main():
    deadline = time.time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 5.0)
    s = Shape()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while time.time() < deadline:
        s.area(20000)
        Shape.build(20000)
        helper(s, 20000)
        s.nest(8, 20000)


main()
