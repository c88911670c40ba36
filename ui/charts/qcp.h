#pragma once
// QCustomPlot's header uses the `signals` and `foreach` keywords, which this project turns off
// (QT_NO_KEYWORDS); include it through here, never directly.
#ifndef signals
#define signals Q_SIGNALS
#define SHARDSCOPE_QCP_UNDEF_SIGNALS
#endif
#ifndef foreach
#define foreach Q_FOREACH
#define SHARDSCOPE_QCP_UNDEF_FOREACH
#endif

#include <qcustomplot.h>

#ifdef SHARDSCOPE_QCP_UNDEF_SIGNALS
#undef signals
#undef SHARDSCOPE_QCP_UNDEF_SIGNALS
#endif
#ifdef SHARDSCOPE_QCP_UNDEF_FOREACH
#undef foreach
#undef SHARDSCOPE_QCP_UNDEF_FOREACH
#endif
