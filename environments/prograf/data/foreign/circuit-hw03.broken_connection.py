import schemdraw
import schemdraw.elements as elm

# series RLC; R1 and L1 are named by arrows that cross: each name sits nearer the other part,
# the arrow's head says which part it is about
d = schemdraw.Drawing(unit=3)
V1 = d.add(elm.SourceV().up().label('V1 10V'))
R = d.add(elm.Resistor().right())
d.add(elm.Annotate().at(R.center).delta(2, 1).label('R1 50Ω'))
L = d.add(elm.Inductor2().right())
C = d.add(elm.Capacitor().down().label('C1 1µF', loc='bottom'))
d.add(elm.Line().left().tox(V1.start))
d.add(elm.Annotate().at(L.center).delta(-2, 1).label('L1 1mH').hold())
d.draw()
