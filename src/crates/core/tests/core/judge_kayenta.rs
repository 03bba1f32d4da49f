//! Kayenta's own classifier tests (spinnaker/kayenta,
//! `kayenta-judge/src/test/scala/com/netflix/kayenta/judge/ClassifierSuite.scala`), every
//! `MannWhitneyClassifier` case with its data, settings and expected classification, run
//! through sluice's judge. Generated from the Scala suite once; the names are Kayenta's.

// The data are Kayenta's literals, digit for digit.
#![allow(clippy::excessive_precision)]

use sluice_core::judge::prepare::NanStrategy;
use sluice_core::judge::{classify, Direction, EffectMeasure, EffectSize, Label, MetricRule};

// The series of the Scala suite, each once (several cases share one).
#[rustfmt::skip]
const SERIES_1: &[f64] = &[
    9.7767343120109462, 10.587071850477695, 7.8375506388901766, 9.3243326886113884,
    8.3774505409784421, 8.9359264399606282, 8.2707663324728511, 9.7484308126716925,
    11.623746715547156, 9.2753442679633942, 8.1538047749171518, 10.562020975754294,
    13.498135575451835, 11.054419256110332, 6.9538903590055092, 12.521008342195479,
    9.0216358603546443, 4.9234856699531662, 11.251360203607172, 11.598449508040337,
    8.435232204668182, 11.110228516867279, 10.70063380164755, 8.9212773652115249,
    10.086167067942661, 11.42107515483087, 9.3792347813644952, 7.7980320148552593,
    10.62339807275746, 11.909642062063739,
];

#[rustfmt::skip]
const SERIES_2: &[f64] = &[
    11.1453586774086, 9.9618059885597017, 7.068574306369829, 7.3012661810483657,
    9.7944630265656727, 9.6037918603687302, 6.1867793350339388, 12.345599159550174,
    10.371891733859533, 8.6094300785016724, 9.913162673361084, 10.361375299003466,
    14.206800387518818, 10.946153754753301, 10.215876627044048, 11.739760899484603,
    10.907627468626439, 12.823353694464775, 8.1018609771732137, 8.4981616408804932,
    12.113441374697231, 13.272210809932028, 10.114579381663297, 6.9463958767978067,
    6.2105278541727778, 10.160401684903775, 8.3457712066455461, 8.383822063895833,
    7.0020205070083765, 10.755757401808442,
];

#[rustfmt::skip]
const SERIES_3: &[f64] = &[
    20.878412601720026, 21.78550581191622, 19.70828084717019, 15.859946903461562,
    19.510058772176841, 19.392005525270303, 22.926528314912101, 17.156530276709894,
    18.655117916226171, 23.422607911610392, 24.055817684156644, 22.62689958516501,
    21.979472967817678, 21.659318607218694, 20.067707574072426, 22.119570836305414,
    16.44037132663307, 21.559622826341268, 21.000181443489218, 17.779369411412663,
    17.806006358943584, 18.537200618386109, 20.555550300210797, 19.552928184468378,
    21.771118944087092, 21.809622806176627, 20.961762909905271, 20.977571577503021,
    19.106303205498794, 16.976918966987078,
];

#[rustfmt::skip]
const SERIES_4: &[f64] = &[
    20.758113589510348, 22.802059629464559, 20.612340363492208, 20.973274654749986,
    23.469237330498622, 21.53133988954805, 21.767353687439805, 18.308050730374301,
    19.062145167827566, 25.879498436001779, 18.982629726336128, 19.387920182269266,
    18.995398251246982, 24.228420230932805, 20.050985172694688, 18.2340451091756,
    17.870515494460435, 23.058103863806618, 18.400259567501134, 16.971352091177167,
    19.467529066052151, 17.90465423342031, 17.553948617825831, 16.104611843907193,
    24.38171081433039, 15.919294339922635, 20.479409626304697, 19.08307201492406,
    17.455788050722866, 18.853826823235142,
];

#[rustfmt::skip]
const SERIES_5: &[f64] = &[
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.6666666666666572, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    3.7037037037036811, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5625000000000142, 0.0, 0.0, 0.0, 0.0,
    3.3333333333333428, 0.0, 1.7543859649122737, 0.0, 1.8518518518518476, 0.0, 0.0,
    1.8518518518518476, 0.0, 0.0, 1.5151515151515156, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    1.7857142857142776, 1.3333333333333286, 0.0, 3.1250000000000142, 1.9607843137255117,
    1.4492753623188293, 2.4390243902438868, 1.6393442622950687, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    1.6129032258064484, 1.9607843137255117, 1.5873015873015817, 0.0, 0.0, 2.8169014084507182, 0.0,
    0.0, 3.0303030303030454, 0.0, 0.0, 3.3898305084745743, 0.0, 0.0, 1.234567901234584, 0.0, 0.0,
    0.0, 0.0, 1.7241379310344769, 0.0, 0.0, 0.0, 0.0, 1.6949152542372872, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0, 1.470588235294116, 0.0, 0.0, 1.3698630136986196, 3.225806451612911,
    1.7543859649122879, 3.4482758620689538, 0.0, 3.3333333333333428, 0.0, 0.0, 0.0,
    1.818181818181813, 0.0, 0.0, 1.4285714285714448, 0.0, 0.0, 1.8867924528301927,
    2.0000000000000284, 0.0, 0.0, 0.0, 2.985074626865682, 0.0, 0.0, 1.6666666666666714, 0.0, 0.0,
    1.5625, 1.9230769230769198, 0.0, 1.8518518518518619, 0.0, 2.7027027027027088, 0.0, 0.0, 0.0,
    1.3513513513513544, 0.0, 1.818181818181813, 0.0, 1.6666666666666572, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0, 1.818181818181813, 0.0, 1.4285714285714164, 0.0, 0.0, 4.1095890410959015, 0.0, 0.0,
    0.0, 1.8518518518518619, 0.0, 0.0, 1.8518518518518476, 1.3888888888888857, 0.0, 0.0, 0.0, 0.0,
    1.8867924528301785, 1.4285714285714164, 0.0, 0.0, 1.5625, 1.8867924528301927, 0.0, 0.0, 0.0,
    0.0, 2.040816326530603, 1.818181818181813, 0.0, 0.0, 1.6393442622950687, 0.0,
    1.7241379310344769, 1.5151515151515156, 2.564102564102555, 0.0, 0.0, 0.0, 0.0,
    5.5555555555555571, 0.0, 0.0, 4.0816326530612059, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    3.5714285714285836, 0.0, 2.040816326530603, 3.1746031746031633, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0, 0.0,
];

#[rustfmt::skip]
const SERIES_6: &[f64] = &[
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5625000000000142, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0, 0.0, 1.3888888888888857, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5384615384615614, 0.0,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.4925373134328339, 0.0,
    0.0, 0.0, 1.6949152542373014, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    1.470588235294116, 0.0, 0.0, 0.0, 0.0, 1.7543859649122879, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    1.8518518518518619, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 1.6393442622950687, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.7241379310344769, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5873015873015817, 0.0,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.4925373134328339, 0.0,
    0.0, 0.0, 3.1249999999999858, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.4925373134328339,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 2.9850746268656536, 0.0, 2.5000000000000284, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.7857142857142776, 0.0, 0.0, 0.0,
];

#[rustfmt::skip]
const SERIES_7: &[f64] = &[
    0.00000000e+00, 0.00000000e+00, 1.46580998e-04, 0.00000000e+00, 0.00000000e+00,
    0.00000000e+00, 7.94701987e-05, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
    2.68889486e-05, 0.00000000e+00, 0.00000000e+00, 2.64935753e-05, 0.00000000e+00,
    0.00000000e+00, 0.00000000e+00, 2.61608895e-05, 1.27824931e-04, 0.00000000e+00,
    0.00000000e+00, 0.00000000e+00, 2.54511211e-05, 2.58665287e-05, 7.63339355e-05,
    0.00000000e+00, 2.54239443e-05, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
    2.61001201e-05, 5.20101940e-05, 0.00000000e+00, 2.64452319e-05, 5.27551370e-05,
    7.83719533e-05, 5.19467027e-05, 2.58344528e-05, 2.58899676e-05, 0.00000000e+00,
    2.59497613e-05, 2.57938043e-05, 7.78553448e-05, 2.60593110e-05, 2.61001201e-05,
    0.00000000e+00, 0.00000000e+00, 2.59349551e-05, 2.60559160e-05, 0.00000000e+00,
    0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
    2.58819267e-05, 0.00000000e+00, 2.58825965e-05, 2.57572635e-05, 2.56877906e-05,
];

#[rustfmt::skip]
const SERIES_8: &[f64] = &[
    0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
    0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 2.91528191e-05, 0.00000000e+00,
    0.00000000e+00, 0.00000000e+00, 2.98284862e-05, 5.99916012e-05, 0.00000000e+00,
    5.92276712e-05, 0.00000000e+00, 2.98053709e-05, 0.00000000e+00, 2.97309350e-05,
    5.92153960e-05, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 2.92800047e-05,
    0.00000000e+00, 2.94550810e-05, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
    5.83958656e-05, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
    0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
    2.88600289e-05, 2.90334756e-05, 2.91740817e-05, 0.00000000e+00, 0.00000000e+00,
    0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 2.92765758e-05,
    0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
    2.94637596e-05, 5.89136326e-05, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00,
];

#[rustfmt::skip]
const SERIES_9: &[f64] = &[
    0.00689808, 0.00568664, 0.00680876, 0.00642045, 0.00561825, 0.00472294, 0.00398378,
    0.00392403, 0.00421201, 0.0047529, 0.00460853, 0.00439888, 0.00561875, 0.01998866, 0.0124369,
    0.00624391, 0.00444361, 0.00442059, 0.00372095, 0.00540736, 0.00715402, 0.00425974,
    0.00414409, 0.01172436, 0.0125959, 0.00371891, 0.00429855, 0.00369876, 0.00325709, 0.00415943,
    0.00371754, 0.00445212, 0.00521721, 0.00443938, 0.00380859, 0.01602997, 0.00788885, 0.0038155,
    0.00326921, 0.00336928, 0.00365917, 0.00333869, 0.00427639, 0.00355911, 0.00381224,
    0.00360057, 0.00349305, 0.00401164, 0.00351947, 0.00356299, 0.003407, 0.00414397, 0.00393346,
    0.00413318, 0.00359041, 0.00366314, 0.00309383, 0.00383733, 0.00363324, 0.00280674,
];

#[rustfmt::skip]
const SERIES_10: &[f64] = &[
    0.00081956, 0.00239282, 0.00133685, 0.00094917, 0.00029518, 0.00035344, 0.00048194,
    0.00034893, 0.0003202, 0.00079814, 0.00090881, 0.00072599, 0.00037819, 0.00038286, 0.00057604,
    0.00064821, 0.00032194, 0.0002245, 0.00025202, 0.00071997, 0.00022721, 0.00042578, 0.00042496,
    0.00045613, 0.00037072, 0.0003317, 0.00032889, 0.00032749, 0.00036093, 0.00029285, 0.00038401,
    0.00044467, 0.00071086, 0.00036692, 0.00052079, 0.00074974, 0.00128791, 0.00062046,
    0.00086345, 0.00118563, 0.00103379, 0.00028913, 0.00057628, 0.00057943, 0.00048735,
    0.00029409, 0.0002005, 0.00016612, 0.00089312, 0.00059367, 0.00061706, 0.00163313, 0.00097784,
    0.00029305, 0.00058839, 0.00085212, 0.00048298, 0.00035546, 0.00025866, 0.00038767,
];

#[rustfmt::skip]
const SERIES_11: &[f64] = &[
    24.24693907, 26.13330099, 22.50056744, 24.36646841, 23.19935673, 19.43801304, 20.99654102,
    18.90793651, 21.31949881, 21.83528381, 21.64211206, 23.13365968, 21.09163134, 19.45540615,
    20.74783158, 22.25527831, 19.82051791, 20.9865487, 19.94450026, 23.2904056, 18.18408424,
    22.13843542, 19.42896044, 19.84140464, 23.91557662, 21.00981557, 21.8594633, 23.11630163,
    22.95700392, 17.80045135,
];

#[rustfmt::skip]
const SERIES_12: &[f64] = &[
    25.09626848, 26.15032198, 24.88431438, 24.18870163, 22.14684987, 28.01743443, 21.29910501,
    27.24688773, 28.64187535, 27.03504445, 24.67888311, 22.35137878, 27.41640397, 26.00225548,
    23.02118534, 25.99647292, 22.77446912, 25.56704719, 25.57025827, 21.2721602, 23.12987357,
    24.59111604, 27.48865016, 27.21967755, 23.5951111, 22.5429607, 25.83015564, 23.31965305,
    24.3911644, 25.11468194,
];

#[rustfmt::skip]
const SERIES_13: &[f64] = &[
    20.0, 22.0, 21.0, 25.0, 30.0,
];

#[rustfmt::skip]
const SERIES_14: &[f64] = &[
    1.0, 2.2, 1.1, 2.5, 3.0,
];

#[rustfmt::skip]
const SERIES_15: &[f64] = &[
    1.0, 1.0, 1.0,
];

#[rustfmt::skip]
const SERIES_16: &[f64] = &[
    1.0, 1.0,
];

#[rustfmt::skip]
const SERIES_17: &[f64] = &[
    1.0, 2.0, 3.0, 4.0, 5.0,
];

#[rustfmt::skip]
const SERIES_18: &[f64] = &[
    5.0, 4.0, 3.0, 2.0, 1.0,
];

#[rustfmt::skip]
const SERIES_19: &[f64] = &[

];

#[rustfmt::skip]
const SERIES_20: &[f64] = &[
    1.0, 1.0, 1.0, 1.0, 1.0,
];

#[rustfmt::skip]
const SERIES_21: &[f64] = &[
    10.0, 10.0, 10.0, 10.0, 10.0,
];

#[rustfmt::skip]
const SERIES_22: &[f64] = &[
    0.0, 0.0, 0.0, 0.0, 0.0,
];

#[rustfmt::skip]
const SERIES_23: &[f64] = &[
    0.05000000074505806, 0.05000000074505806, 0.01666666753590107, 0.01666666753590107,
    0.01666666753590107, 0.05000000074505806, 0.03333333507180214, 0.05000000260770321,
    0.05000000260770321, 0.13333333656191826,
];

/// Kayenta's classifier settings of one case, as a sluice rule.
#[allow(clippy::too_many_arguments)]
fn rule(
    tolerance: f64,
    confidence: f64,
    measure: EffectMeasure,
    allowed: (f64, f64),
    critical_at: (f64, f64),
    direction: Direction,
    nan_strategy: NanStrategy,
    critical: bool,
) -> MetricRule {
    MetricRule {
        direction,
        critical,
        nan_strategy,
        effect_size: EffectSize {
            measure,
            allowed_decrease: allowed.0,
            allowed_increase: allowed.1,
            critical_decrease: critical_at.0,
            critical_increase: critical_at.1,
        },
        tolerance,
        confidence,
        ..MetricRule::default()
    }
}

/// Kayenta: "Mann-Whitney Classifier Test: Pass Metric".
#[test]
fn kayenta_mann_whitney_classifier_test_pass_metric() {
    let (experiment, control) = (SERIES_1, SERIES_2);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Test: High Metric".
#[test]
fn kayenta_mann_whitney_classifier_test_high_metric() {
    let (experiment, control) = (SERIES_3, SERIES_2);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Test: Low Metric".
#[test]
fn kayenta_mann_whitney_classifier_test_low_metric() {
    let (experiment, control) = (SERIES_1, SERIES_4);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Low, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Directional Test: Increase".
#[test]
fn kayenta_mann_whitney_classifier_directional_test_increase() {
    let (experiment, control) = (SERIES_1, SERIES_4);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Increase,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Directional Test: Decrease".
#[test]
fn kayenta_mann_whitney_classifier_directional_test_decrease() {
    let (experiment, control) = (SERIES_3, SERIES_2);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Directional Test: High Metric".
#[test]
fn kayenta_mann_whitney_classifier_directional_test_high_metric() {
    let (experiment, control) = (SERIES_3, SERIES_2);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Increase,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
    assert!(!result.critical, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Directional Test: Low Metric".
#[test]
fn kayenta_mann_whitney_classifier_directional_test_low_metric() {
    let (experiment, control) = (SERIES_1, SERIES_4);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Low, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Test: High Metric (Large Input)".
#[test]
fn kayenta_mann_whitney_classifier_test_high_metric_large_input() {
    let (experiment, control) = (SERIES_5, SERIES_6);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
    assert!(!result.critical, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_HIGH_EXPERIMENT: &[f64] =
    &[20.0, 22.0, 21.0, 25.0, 30.0];
const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_HIGH_CONTROL: &[f64] =
    &[1.0, 2.2, 1.1, 2.5, 3.0];

/// Kayenta: "Mann-Whitney Classifier Test - Mean Ratio Effect Size: High".
#[test]
fn kayenta_mann_whitney_classifier_test_mean_ratio_effect_size_high() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_HIGH_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_HIGH_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (0.8, 1.2),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Test - Mean Ratio Effect Size: Low".
#[test]
fn kayenta_mann_whitney_classifier_test_mean_ratio_effect_size_low() {
    let (experiment, control) = (SERIES_1, SERIES_4);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (0.8, 1.2),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Low, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_PASS_EXPERIMENT: &[f64] =
    &[10.0, 12.2, 10.1, 12.5, 23.0];
const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_PASS_CONTROL: &[f64] =
    &[20.0, 22.0, 21.0, 25.0, 30.0];

/// Kayenta: "Mann-Whitney Classifier Test - Mean Ratio Effect Size: Pass".
#[test]
fn kayenta_mann_whitney_classifier_test_mean_ratio_effect_size_pass() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_PASS_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_PASS_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (0.5, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_PASS_LARGE_INPUT_EXPERIMENT:
    &[f64] = &[
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.6666666666666572,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    3.7037037037036811,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.5625000000000142,
    0.0,
    0.0,
    0.0,
    0.0,
    3.3333333333333428,
    0.0,
    1.7543859649122737,
    0.0,
    1.8518518518518476,
    0.0,
    0.0,
    1.8518518518518476,
    0.0,
    0.0,
    1.5151515151515156,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.7857142857142776,
    1.3333333333333286,
    0.0,
    3.1250000000000142,
    1.9607843137255117,
    1.4492753623188293,
    2.4390243902438868,
    1.6393442622950687,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.6129032258064484,
    1.9607843137255117,
    1.5873015873015817,
    0.0,
    0.0,
    2.8169014084507182,
    0.0,
    0.0,
    3.0303030303030454,
    0.0,
    0.0,
    3.3898305084745743,
    0.0,
    0.0,
    1.234567901234584,
    0.0,
    0.0,
    0.0,
    0.0,
    1.7241379310344769,
    0.0,
    0.0,
    0.0,
    0.0,
    1.6949152542372872,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.470588235294116,
    0.0,
    0.0,
    1.3698630136986196,
    3.225806451612911,
    1.7543859649122879,
    3.4482758620689538,
    0.0,
    3.3333333333333428,
    0.0,
    0.0,
    0.0,
    1.818181818181813,
    0.0,
    0.0,
    1.4285714285714448,
    0.0,
    0.0,
    1.8867924528301927,
    2.0000000000000284,
    0.0,
    0.0,
    0.0,
    2.985074626865682,
    0.0,
    0.0,
    1.6666666666666714,
    0.0,
    0.0,
    1.5625,
    1.9230769230769198,
    0.0,
    1.8518518518518619,
    0.0,
    2.7027027027027088,
    0.0,
    0.0,
    0.0,
    1.3513513513513544,
    0.0,
    1.818181818181813,
    0.0,
    1.6666666666666572,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.818181818181813,
    0.0,
    1.4285714285714164,
    0.0,
    0.0,
    4.1095890410959015,
    0.0,
    0.0,
    0.0,
    1.8518518518518619,
    0.0,
    0.0,
    1.8518518518518476,
    1.3888888888888857,
    0.0,
    0.0,
    0.0,
    0.0,
    1.8867924528301785,
    1.4285714285714164,
    0.0,
    0.0,
    1.5625,
    1.8867924528301927,
    0.0,
    0.0,
    0.0,
    0.0,
    2.040816326530603,
    1.818181818181813,
    0.0,
    0.0,
    1.6393442622950687,
    0.0,
    1.7241379310344769,
    1.5151515151515156,
    2.564102564102555,
    0.0,
    0.0,
    0.0,
    0.0,
    5.5555555555555571,
    0.0,
    0.0,
    4.0816326530612059,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    3.5714285714285836,
    0.0,
    2.040816326530603,
    3.1746031746031633,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
];
const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_PASS_LARGE_INPUT_CONTROL:
    &[f64] = &[
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.5625000000000142,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.3888888888888857,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.5384615384615614,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.4925373134328339,
    0.0,
    0.0,
    0.0,
    1.6949152542373014,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.470588235294116,
    0.0,
    0.0,
    0.0,
    0.0,
    1.7543859649122879,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.8518518518518619,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.6393442622950687,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.7241379310344769,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.5873015873015817,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.4925373134328339,
    0.0,
    0.0,
    0.0,
    3.1249999999999858,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.4925373134328339,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    2.9850746268656536,
    0.0,
    2.5000000000000284,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.7857142857142776,
    0.0,
    0.0,
    0.0,
];

/// Kayenta: "Mann-Whitney Classifier Test - Mean Ratio Effect Size: Pass (Large Input)".
#[test]
fn kayenta_mann_whitney_classifier_test_mean_ratio_effect_size_pass_large_input() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_PASS_LARGE_INPUT_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_MEAN_RATIO_EFFECT_SIZE_PASS_LARGE_INPUT_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 5.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Test - CLES Effect Size: Pass".
#[test]
fn kayenta_mann_whitney_classifier_test_cles_effect_size_pass() {
    let (experiment, control) = (SERIES_7, SERIES_8);
    let rule = rule(
        0.20,
        0.98,
        EffectMeasure::Cles,
        (0.5, 0.8),
        (0.5, 0.5),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Test - CLES Effect Size: High".
#[test]
fn kayenta_mann_whitney_classifier_test_cles_effect_size_high() {
    let (experiment, control) = (SERIES_9, SERIES_10);
    let rule = rule(
        0.20,
        0.98,
        EffectMeasure::Cles,
        (0.2, 0.8),
        (0.5, 0.5),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Test - CLES Effect Size: Low".
#[test]
fn kayenta_mann_whitney_classifier_test_cles_effect_size_low() {
    let (experiment, control) = (SERIES_11, SERIES_12);
    let rule = rule(
        0.20,
        0.98,
        EffectMeasure::Cles,
        (0.2, 0.8),
        (0.5, 0.5),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Low, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_CRITICAL_HIGH_EXPERIMENT: &[f64] =
    &[20.0, 22.0, 21.0, 25.0, 30.0];
const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_CRITICAL_HIGH_CONTROL: &[f64] =
    &[1.0, 2.2, 1.1, 2.5, 3.0];

/// Kayenta: "Mann-Whitney Classifier Test - Critical Effect Size: Critical High".
#[test]
fn kayenta_mann_whitney_classifier_test_critical_effect_size_critical_high() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_CRITICAL_HIGH_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_CRITICAL_HIGH_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.2),
        Direction::Either,
        NanStrategy::Remove,
        true,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
    assert!(result.critical, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_CRITICAL_LOW_EXPERIMENT: &[f64] =
    &[2.0, 2.0, 2.0, 2.0, 3.0];
const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_CRITICAL_LOW_CONTROL: &[f64] =
    &[10.0, 20.2, 10.1, 20.5, 30.0];

/// Kayenta: "Mann-Whitney Classifier Test - Critical Effect Size: Critical Low".
#[test]
fn kayenta_mann_whitney_classifier_test_critical_effect_size_critical_low() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_CRITICAL_LOW_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_CRITICAL_LOW_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.2, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        true,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Low, "{result:?}");
    assert!(result.critical, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_HIGH_EXPERIMENT: &[f64] =
    &[20.0, 22.0, 21.0, 25.0, 30.0];
const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_HIGH_CONTROL: &[f64] =
    &[1.0, 2.2, 1.1, 2.5, 3.0];

/// Kayenta: "Mann-Whitney Classifier Test - Critical Effect Size: High".
#[test]
fn kayenta_mann_whitney_classifier_test_critical_effect_size_high() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_HIGH_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_HIGH_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 5.0),
        (1.0, 13.0),
        Direction::Either,
        NanStrategy::Remove,
        true,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
    assert!(!result.critical, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_PASS_EXPERIMENT: &[f64] =
    &[20.0, 22.0, 21.0, 25.0, 30.0];
const KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_PASS_CONTROL: &[f64] =
    &[1.0, 2.2, 1.1, 2.5, 3.0];

/// Kayenta: "Mann-Whitney Classifier Test - Critical Effect Size: Pass".
#[test]
fn kayenta_mann_whitney_classifier_test_critical_effect_size_pass() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_PASS_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_CLASSIFIER_TEST_CRITICAL_EFFECT_SIZE_PASS_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 13.0),
        (1.0, 15.0),
        Direction::Either,
        NanStrategy::Remove,
        true,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
    assert!(!result.critical, "{result:?}");
}

/// Kayenta: "Mann-Whitney Classifier Test - Critical Effect Size: Critical High (Default Thresholds)".
#[test]
fn kayenta_mann_whitney_classifier_test_critical_effect_size_critical_high_default_thresholds() {
    let (experiment, control) = (SERIES_13, SERIES_14);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        true,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
    assert!(result.critical, "{result:?}");
}

/// Kayenta: "Mann-Whitney Tied Observations".
#[test]
fn kayenta_mann_whitney_tied_observations() {
    let (experiment, control) = (SERIES_15, SERIES_16);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Identical Populations".
#[test]
fn kayenta_mann_whitney_identical_populations() {
    let (experiment, control) = (SERIES_17, SERIES_18);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_LEADING_ZERO_IDENTICAL_POPULATION_EXPERIMENT: &[f64] =
    &[0.0, 1.0, 1.0, 1.0, 1.0];
const KAYENTA_MANN_WHITNEY_LEADING_ZERO_IDENTICAL_POPULATION_CONTROL: &[f64] =
    &[1.0, 1.0, 1.0, 1.0, 1.0];

/// Kayenta: "Mann-Whitney Leading Zero Identical Population".
#[test]
fn kayenta_mann_whitney_leading_zero_identical_population() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_LEADING_ZERO_IDENTICAL_POPULATION_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_LEADING_ZERO_IDENTICAL_POPULATION_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Missing Experiment Data".
#[test]
fn kayenta_mann_whitney_missing_experiment_data() {
    let (experiment, control) = (SERIES_19, SERIES_17);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Nodata, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_MISSING_EXPERIMENT_DATA_CRITICAL_METRIC_CONTROL: &[f64] =
    &[1.0, 2.0, 3.0, 4.0, 5.0];

/// Kayenta: "Mann-Whitney Missing Experiment Data: Critical Metric".
#[test]
fn kayenta_mann_whitney_missing_experiment_data_critical_metric() {
    let (experiment, control) = (
        SERIES_19,
        KAYENTA_MANN_WHITNEY_MISSING_EXPERIMENT_DATA_CRITICAL_METRIC_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        true,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Nodata, "{result:?}");
    assert!(result.critical, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_MISSING_EXPERIMENT_DATA_WITH_NAN_REPLACEMENT_CONTROL: &[f64] =
    &[1.0, 2.0, 3.0, 4.0, 5.0];

/// Kayenta: "Mann-Whitney Missing Experiment Data with NaN Replacement".
#[test]
fn kayenta_mann_whitney_missing_experiment_data_with_nan_replacement() {
    let (experiment, control) = (
        SERIES_19,
        KAYENTA_MANN_WHITNEY_MISSING_EXPERIMENT_DATA_WITH_NAN_REPLACEMENT_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Replace,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Missing Data: Reason String".
#[test]
fn kayenta_mann_whitney_missing_data_reason_string() {
    let (experiment, control) = (SERIES_19, SERIES_19);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Decrease,
        NanStrategy::Remove,
        true,
    );
    let result = classify(experiment, control, &rule);
    assert!(result.reason.is_some_and(|r| !r.is_empty()));
}

const KAYENTA_MANN_WHITNEY_MAJORITY_TIED_OBSERVATIONS_EXPERIMENT: &[f64] =
    &[1.0, 1.0, 1.0, 1.0, 10.0];
/// Kayenta: "Mann-Whitney Majority Tied Observations".
#[test]
fn kayenta_mann_whitney_majority_tied_observations() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_MAJORITY_TIED_OBSERVATIONS_EXPERIMENT,
        SERIES_20,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
}

/// Kayenta: "Mann-Whitney Tied Ranks".
#[test]
fn kayenta_mann_whitney_tied_ranks() {
    let (experiment, control) = (SERIES_21, SERIES_20);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_TIED_RANKS_WITH_ZEROS_EXPERIMENT: &[f64] =
    &[10.0, 10.0, 10.0, 10.0, 10.0];
/// Kayenta: "Mann-Whitney Tied Ranks With Zeros".
#[test]
fn kayenta_mann_whitney_tied_ranks_with_zeros() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_TIED_RANKS_WITH_ZEROS_EXPERIMENT,
        SERIES_22,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
}

const KAYENTA_MANN_WHITNEY_ZERO_MEAN_HIGH_METRIC_WITH_EFFECT_SIZE_EXPERIMENT: &[f64] =
    &[54.9, 54.5, 55.1, 55.6, 57.4];
const KAYENTA_MANN_WHITNEY_ZERO_MEAN_HIGH_METRIC_WITH_EFFECT_SIZE_CONTROL: &[f64] =
    &[0.0, 0.0, 0.0, 0.0, 0.0];

/// Kayenta: "Mann-Whitney Zero Mean: High Metric with Effect Size".
#[test]
fn kayenta_mann_whitney_zero_mean_high_metric_with_effect_size() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_ZERO_MEAN_HIGH_METRIC_WITH_EFFECT_SIZE_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_ZERO_MEAN_HIGH_METRIC_WITH_EFFECT_SIZE_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (0.8, 1.2),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
    assert!(result.mean_ratio.is_nan(), "{result:?}");
}

const KAYENTA_MANN_WHITNEY_ZERO_MEAN_LOW_METRIC_WITH_EFFECT_SIZE_EXPERIMENT: &[f64] =
    &[0.0, 0.0, 0.0, 0.0, 0.0];
const KAYENTA_MANN_WHITNEY_ZERO_MEAN_LOW_METRIC_WITH_EFFECT_SIZE_CONTROL: &[f64] =
    &[54.9, 54.5, 55.1, 55.6, 57.4];

/// Kayenta: "Mann-Whitney Zero Mean: Low Metric with Effect Size".
#[test]
fn kayenta_mann_whitney_zero_mean_low_metric_with_effect_size() {
    let (experiment, control) = (
        KAYENTA_MANN_WHITNEY_ZERO_MEAN_LOW_METRIC_WITH_EFFECT_SIZE_EXPERIMENT,
        KAYENTA_MANN_WHITNEY_ZERO_MEAN_LOW_METRIC_WITH_EFFECT_SIZE_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (0.8, 1.2),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Low, "{result:?}");
    assert!(result.mean_ratio.is_nan(), "{result:?}");
}

const KAYENTA_MANN_WHITNEY_ZERO_MEAN_CRITICAL_METRIC_CONTROL: &[f64] =
    &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];

/// Kayenta: "Mann-Whitney Zero Mean: Critical Metric".
#[test]
fn kayenta_mann_whitney_zero_mean_critical_metric() {
    let (experiment, control) = (
        SERIES_23,
        KAYENTA_MANN_WHITNEY_ZERO_MEAN_CRITICAL_METRIC_CONTROL,
    );
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (1.0, 1.0),
        (0.8, 1.2),
        Direction::Either,
        NanStrategy::Replace,
        true,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::High, "{result:?}");
    assert!(result.critical, "{result:?}");
}

/// Kayenta: "Mann-Whitney Zero Mean: Pass Metric".
#[test]
fn kayenta_mann_whitney_zero_mean_pass_metric() {
    let (experiment, control) = (SERIES_22, SERIES_22);
    let rule = rule(
        0.10,
        0.95,
        EffectMeasure::MeanRatio,
        (0.8, 1.2),
        (1.0, 1.0),
        Direction::Either,
        NanStrategy::Remove,
        false,
    );
    let result = classify(experiment, control, &rule);
    assert_eq!(result.label, Label::Pass, "{result:?}");
    assert_eq!(result.mean_ratio, 1.0, "{result:?}");
}
