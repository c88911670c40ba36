// fp16 dynamic loss scaling (profiler/runtime/loss_scaler.h) against DeepSpeed's DynamicLossScaler
// and PyTorch's GradScaler, step by step: skips, back-off with hysteresis, growth after a window of
// clean steps, the floor, and a static scale.
#include <QtTest>

#include <vector>

#include "profiler/runtime/loss_scaler.h"

using shardscope::runtime::LossScaler;

class TestLossScaler : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // DeepSpeed's defaults: 2^16, window 1000, hysteresis 2, min 1.
  void deepSpeedHysteresis() {
    LossScaler s(0, 16, 1000, 2, 1);
    QVERIFY(s.dynamic());
    QCOMPARE(s.scale(), 65536.0);
    QVERIFY(s.update(true));  // first overflow: skipped, scale kept (hysteresis 2 -> 1)
    QCOMPARE(s.scale(), 65536.0);
    QVERIFY(s.update(true));  // second: skipped, halved
    QCOMPARE(s.scale(), 32768.0);
    QVERIFY(s.update(true));  // hysteresis stays spent until the scale grows again: halved at once
    QCOMPARE(s.scale(), 16384.0);
    // 999 clean steps since the last overflow: no growth yet; the 1000th doubles.
    for (int i = 0; i < 999; ++i) QVERIFY(!s.update(false));
    QCOMPARE(s.scale(), 16384.0);
    QVERIFY(!s.update(false));
    QCOMPARE(s.scale(), 32768.0);
    // Growth reset the hysteresis: one overflow is tolerated again.
    QVERIFY(s.update(true));
    QCOMPARE(s.scale(), 32768.0);
  }

  // From the start, the first growth comes after `window` clean steps.
  void growthFromTheStart() {
    LossScaler s(0, 4, 3, 2, 1);
    QVERIFY(!s.update(false));
    QVERIFY(!s.update(false));
    QCOMPARE(s.scale(), 16.0);
    QVERIFY(!s.update(false));
    QCOMPARE(s.scale(), 32.0);
    for (int i = 0; i < 3; ++i) s.update(false);
    QCOMPARE(s.scale(), 64.0);
  }

  // PyTorch's GradScaler: backoff 0.5 at every overflow (hysteresis 1), growth x2 after 2000 steps.
  void gradScalerRule() {
    LossScaler s(0, 16, 2000, 1, 1);
    QVERIFY(s.update(true));
    QCOMPARE(s.scale(), 32768.0);
    QVERIFY(s.update(true));
    QCOMPARE(s.scale(), 16384.0);
    for (int i = 0; i < 1999; ++i) s.update(false);
    QCOMPARE(s.scale(), 16384.0);
    s.update(false);
    QCOMPARE(s.scale(), 32768.0);
  }

  void floorAndStatic() {
    LossScaler s(0, 2, 1000, 1, 2);  // 4, never below 2
    s.update(true);
    QCOMPARE(s.scale(), 2.0);
    QVERIFY(s.update(true));  // still skipped, floor held
    QCOMPARE(s.scale(), 2.0);
    LossScaler fixed(128, 16, 1000, 2, 1);
    QVERIFY(!fixed.dynamic());
    QCOMPARE(fixed.scale(), 128.0);
    QVERIFY(!fixed.update(true));  // a static scale neither skips nor changes
    QCOMPARE(fixed.scale(), 128.0);
  }
};

QTEST_GUILESS_MAIN(TestLossScaler)
#include "tst_loss_scaler.moc"
