import schemdraw
import schemdraw.elements as elm

d = schemdraw.Drawing()
V1 = d.add(elm.Battery().up().label('V1 6V'))
S1 = d.add(elm.Switch().right().label('S1'))
H1 = d.add(elm.Lamp().down().label('H1 6V', loc='bottom'))
d.add(elm.Line().left().tox(V1.start))
# the second lamp stands taller, to the right; bent wires take both its ends to the first lamp's
H2 = d.add(elm.Lamp().at((6, 4)).down(4).label('H2 6V'))
d.add(elm.Wire('|-').at(S1.end).to(H2.start))
d.add(elm.Wire('-|').at(H1.end).to(H2.end))
d.add(elm.Tag().at((6, 4)).label('L+'))
d.draw()
