import schemdraw
import schemdraw.elements as elm

# RC low-pass. The wire from R1 bends right then up to the output terminal;
# C1 hangs from the middle of the wire's first leg (a T junction on the bend's leg).
with schemdraw.Drawing() as d:
    V1 = elm.SourceV().up().label('V1\n5V')
    R1 = elm.Resistor().right().label('R1\n1kΩ')
    elm.Wire('-|').to((6, 4.5))
    elm.Dot(open=True).label('Vout', loc='right')
    C1 = elm.Capacitor().at((4.5, 3)).down().label('C1\n100nF', loc='bottom')
    elm.Line().at(V1.start).right().tox(6)
    elm.Ground().at(V1.start)
    elm.CurrentLabelInline(direction='in').at(R1).label('i')
